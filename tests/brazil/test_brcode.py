"""The PIX BR Code: its CRC, the Banco Central's examples, other libraries' vectors, properties of
any code built, and the inputs it refuses."""

from __future__ import annotations

import binascii
import re
import string
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tucano.brazil.brcode import (
    MERCHANT_CITY_MAX,
    MERCHANT_NAME_MAX,
    TLV_VALUE_MAX,
    TXID_MAX,
    br_code_text,
    build_br_code,
    crc16_ccitt_false,
    has_valid_crc,
    parse_tlv,
)

EXPECTED_IDS = ["00", "01", "26", "52", "53", "54", "58", "59", "60", "62", "63"]
PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")


def tlv(field_id: str, value: str) -> str:
    return f"{field_id}{len(value):02d}{value}"


def assemble(fields: list[tuple[str, str]]) -> str:
    """A test-local EMV assembly: `fields`, then 6304 and a CRC from the stdlib's binascii."""
    body = "".join(tlv(i, v) for i, v in fields if i != "63") + "6304"
    return body + f"{binascii.crc_hqx(body.encode('utf-8'), 0xFFFF):04X}"


def without_field_01(payload: str) -> str:
    """`payload` without its point-of-initiation field, CRC written afresh."""
    return assemble([(i, v) for i, v in parse_tlv(payload) if i != "01"])


def field(payload: str, field_id: str) -> str:
    return dict(parse_tlv(payload))[field_id]


# -- 1. The CRC -----------------------------------------------------------------------------------


def test_crc_check_value() -> None:
    # The catalogue check value of CRC-16/CCITT-FALSE, and its init for no data.
    assert crc16_ccitt_false(b"123456789") == 0x29B1
    assert crc16_ccitt_false(b"") == 0xFFFF


@given(st.binary(max_size=512))
def test_crc_matches_the_stdlib(data: bytes) -> None:
    assert crc16_ccitt_false(data) == binascii.crc_hqx(data, 0xFFFF)


# -- 2. The Banco Central's examples --------------------------------------------------------------

# The static example of the "Manual de Padrões para Iniciação do Pix" (random key, no amount,
# txid ***). The manual omits the optional field 01, which build_br_code always writes as 12.
MANUAL_STATIC = (
    "00020126580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR"
    "5913Fulano de Tal6008BRASILIA62070503***63041D3D"
)
# The same manual's dynamic example: field 26 carries a URL (subfield 25) instead of a key.
MANUAL_DYNAMIC = (
    "00020101021226700014br.gov.bcb.pix2548pix.example.com/8b3da2f39a4140d1a91abd93113bd441"
    "5204000053039865802BR5913Fulano de Tal6008BRASILIA62070503***630464E4"
)
# The example of the Banco Central's generic BR Code manual (ManualBRCode.pdf), several
# arrangements in one code, as repository naomijub/brcode (Rust) tests it in tests/lib.rs.
BR_CODE_MANUAL = (
    "00020104141234567890123426580014BR.GOV.BCB.PIX0136123e4567-e12b-12d1-a456-426655440000"
    "27300012BR.COM.OUTRO011001234567895204000053039865406123.455802BR5917NOME DO RECEBEDOR"
    "6008BRASILIA61087007490062190515RP12345678-201980390012BR.COM.OUTRO01190123.ABCD.3456.WXYZ"
    "6304AD38"
)


def test_manual_static_example_field_by_field() -> None:
    assert has_valid_crc(MANUAL_STATIC)
    assert crc16_ccitt_false(MANUAL_STATIC[:-4].encode()) == 0x1D3D
    fields = parse_tlv(MANUAL_STATIC)
    assert fields == [
        ("00", "01"),
        ("26", "0014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-426655440000"),
        ("52", "0000"),
        ("53", "986"),
        ("58", "BR"),
        ("59", "Fulano de Tal"),
        ("60", "BRASILIA"),
        ("62", "0503***"),
        ("63", "1D3D"),
    ]
    assert parse_tlv(fields[1][1]) == [
        ("00", "br.gov.bcb.pix"),
        ("01", "123e4567-e12b-12d1-a456-426655440000"),
    ]
    assert parse_tlv(fields[7][1]) == [("05", "***")]
    assert assemble(fields) == MANUAL_STATIC


def test_build_reproduces_the_manual_static_example() -> None:
    code = build_br_code(
        pix_key="123e4567-e12b-12d1-a456-426655440000",
        merchant_name="Fulano de Tal",
        merchant_city="BRASILIA",
        txid="***",
    )
    # The manual's example with field 01 = 12 after field 00, and the CRC that follows from it.
    assert code == (
        "000201010212"
        "26580014br.gov.bcb.pix0136123e4567-e12b-12d1-a456-4266554400005204000053039865802BR"
        "5913Fulano de Tal6008BRASILIA62070503***6304EF53"
    )
    assert has_valid_crc(code)
    assert without_field_01(code) == MANUAL_STATIC


def test_manual_dynamic_example() -> None:
    assert has_valid_crc(MANUAL_DYNAMIC)
    fields = parse_tlv(MANUAL_DYNAMIC)
    assert [i for i, _ in fields] == ["00", "01", "26", "52", "53", "58", "59", "60", "62", "63"]
    assert parse_tlv(dict(fields)["26"]) == [
        ("00", "br.gov.bcb.pix"),
        ("25", "pix.example.com/8b3da2f39a4140d1a91abd93113bd441"),
    ]
    assert assemble(fields) == MANUAL_DYNAMIC
    # A static code for the same receiver differs only in field 26 (and the CRC).
    code = build_br_code(
        pix_key="fulano@example.com",
        merchant_name="Fulano de Tal",
        merchant_city="BRASILIA",
        txid="***",
    )
    ours = [(i, v) for i, v in parse_tlv(code) if i not in ("26", "63")]
    assert ours == [(i, v) for i, v in fields if i not in ("26", "63")]


def test_br_code_manual_example() -> None:
    assert has_valid_crc(BR_CODE_MANUAL)
    fields = parse_tlv(BR_CODE_MANUAL)
    assert [i for i, _ in fields] == [
        "00", "04", "26", "27", "52", "53", "54", "58", "59", "60", "61", "62", "80", "63",
    ]  # fmt: skip
    values = dict(fields)
    assert parse_tlv(values["27"]) == [("00", "BR.COM.OUTRO"), ("01", "0123456789")]
    assert parse_tlv(values["62"]) == [("05", "RP12345678-2019")]
    assert parse_tlv(values["80"]) == [("00", "BR.COM.OUTRO"), ("01", "0123.ABCD.3456.WXYZ")]
    assert values["54"] == "123.45"
    assert assemble(fields) == BR_CODE_MANUAL


@pytest.mark.parametrize("position", [0, 40, 100, len(MANUAL_STATIC) - 1])
def test_a_changed_character_breaks_the_crc(position: int) -> None:
    original = MANUAL_STATIC[position]
    changed = "1" if original != "1" else "2"
    assert not has_valid_crc(MANUAL_STATIC[:position] + changed + MANUAL_STATIC[position + 1 :])


@pytest.mark.parametrize(
    "payload",
    [
        "",
        MANUAL_STATIC[:-4],  # no CRC value
        MANUAL_STATIC[:-8],  # no field 63 at all
        MANUAL_STATIC[:-4] + "1d3d",  # the contract's CRC is upper-case hex
        MANUAL_STATIC[:-8] + "63051D3D0",  # field 63 must announce 4 characters
        MANUAL_STATIC + "0000",  # something after the CRC
        "0002016304FFFF",
    ],
)
def test_has_valid_crc_refuses(payload: str) -> None:
    assert not has_valid_crc(payload)


# -- 3. Other libraries' test vectors -------------------------------------------------------------

# starkbank/brcode-python, tests/brcode/testStaticBrcode.py: key "arya@stark.com", amount 12500
# (cents), name "Arya Stark", city "São Paulo", txid "1297364819273409". The library writes no
# field 01; it removes the city's accent as this module does.
STARK = (
    "00020126360014br.gov.bcb.pix0114arya@stark.com5204000053039865406125.005802BR5910Arya Stark"
    "6009Sao Paulo622005161297364819273409630440F2"
)
# ogilvieira/pixbrasil, src/index.test.ts ("Valid Amount"): key "ogilvieira@gmail.com", name
# "Gilmair Vieira", city "SAO PAULO", amount 324.12. The library upper-cases the name and the GUI
# and writes no field 01.
PIXBRASIL_AMOUNT = (
    "00020126420014BR.GOV.BCB.PIX0120ogilvieira@gmail.com5204000053039865406324.125802BR"
    "5914GILMAIR VIEIRA6009SAO PAULO62070503***6304567B"
)
# ogilvieira/pixbrasil, src/index.test.ts ("Valid Transaction ID"): the same, no amount, txid
# "PIXBR1337".
PIXBRASIL_TXID = (
    "00020126420014BR.GOV.BCB.PIX0120ogilvieira@gmail.com5204000053039865802BR5914GILMAIR VIEIRA"
    "6009SAO PAULO62130509PIXBR133763043CA1"
)
# piggly-dev/php-pix, tests/ValidStaticPixTest.php ("NUBANK (SEM TID)", a code a bank app made):
# key "aae2196f-5f93-46e4-89e6-73bf4138427b", amount 1.01, name "Caique Monteiro Araujo", city
# "São Paulo", postal code 05409000. The bank upper-cases the city and the GUI, adds field 61
# and writes no field 01.
PIGGLY_NUBANK = (
    "00020126580014BR.GOV.BCB.PIX0136aae2196f-5f93-46e4-89e6-73bf4138427b52040000530398654041.01"
    "5802BR5922Caique Monteiro Araujo6009SAO PAULO61080540900062070503***630456D6"
)
# joseviniciusnunes/qrcode-pix, __tests__/QrCode.test.ts ("03 - Basic - Value"): key
# "test@mail.com.br", name "Fulano de Tal", city "SAO PAULO", value 100.99. Field 01 = 11
# (reusable), GUI upper-case, no field 62.
QRCODE_PIX_VALUE = (
    "00020101021126380014BR.GOV.BCB.PIX0116test@mail.com.br5204000053039865406100.995802BR"
    "5913Fulano de Tal6009SAO PAULO6304442D"
)
# joseviniciusnunes/qrcode-pix, __tests__/QrCode.test.ts ("08 - Basic - notRepeatPayment"):
# field 01 = 12 as here, but GUI upper-case and no field 62.
QRCODE_PIX_ONCE = (
    "00020101021226380014BR.GOV.BCB.PIX0116test@mail.com.br5204000053039865802BR5913Fulano de Tal"
    "6009SAO PAULO6304DC67"
)
# thalesog/pix-utils, src/__tests__/parser.test.ts (STATIC_TEST_EMV): with field 26-02, the
# additional information, and no field 01.
PIX_UTILS_STATIC = (
    "00020126510014br.gov.bcb.pix0115thalesog@me.com0210Pedido 123520400005303986540510.005802BR"
    "5914Thales Ogliari6002SC62070503***6304E5AB"
)

LIBRARY_VECTORS = [
    STARK,
    PIXBRASIL_AMOUNT,
    PIXBRASIL_TXID,
    PIGGLY_NUBANK,
    QRCODE_PIX_VALUE,
    QRCODE_PIX_ONCE,
    PIX_UTILS_STATIC,
]


@pytest.mark.parametrize("vector", LIBRARY_VECTORS)
def test_library_vector_crc_and_lengths(vector: str) -> None:
    assert has_valid_crc(vector)
    fields = parse_tlv(vector)
    # Every length prefix is its value's length (reassembling gives the same text) and <= 99.
    assert assemble(fields) == vector
    assert all(len(value) <= TLV_VALUE_MAX for _, value in fields)
    for _, value in (f for f in fields if f[0] in ("26", "62")):
        assert "".join(tlv(i, v) for i, v in parse_tlv(value)) == value


def test_stark_vector_is_our_code_without_field_01() -> None:
    code = build_br_code(
        pix_key="arya@stark.com",
        merchant_name="Arya Stark",
        merchant_city="São Paulo",
        txid="1297364819273409",
        amount=Decimal(12500) / 100,
    )
    assert has_valid_crc(code)
    assert field(code, "01") == "12"
    assert field(code, "60") == "Sao Paulo"
    assert without_field_01(code) == STARK


@pytest.mark.parametrize(
    ("vector", "txid", "amount"),
    [(PIXBRASIL_AMOUNT, "***", Decimal("324.12")), (PIXBRASIL_TXID, "PIXBR1337", None)],
)
def test_pixbrasil_vectors_share_our_fields(vector: str, txid: str, amount: Decimal | None) -> None:
    code = build_br_code(
        pix_key="ogilvieira@gmail.com",
        merchant_name="Gilmair Vieira",
        merchant_city="SAO PAULO",
        txid=txid,
        amount=amount,
    )
    ours, theirs = dict(parse_tlv(code)), dict(parse_tlv(vector))
    for field_id in ("52", "53", "58", "60", "62"):
        assert ours[field_id] == theirs[field_id]
    assert ours.get("54") == theirs.get("54")
    assert ours["59"].upper() == theirs["59"]  # pixbrasil upper-cases the name
    assert ours["26"].upper() == theirs["26"].upper()  # and the GUI


def test_piggly_bank_vector_shares_our_fields() -> None:
    code = build_br_code(
        pix_key="aae2196f-5f93-46e4-89e6-73bf4138427b",
        merchant_name="Caique Monteiro Araujo",
        merchant_city="São Paulo",
        txid="***",
        amount=Decimal("1.01"),
    )
    ours, theirs = dict(parse_tlv(code)), dict(parse_tlv(PIGGLY_NUBANK))
    for field_id in ("52", "53", "54", "58", "59", "62"):
        assert ours[field_id] == theirs[field_id]
    assert ours["60"] == "Sao Paulo"
    assert ours["60"].upper() == theirs["60"]
    assert parse_tlv(ours["26"])[1] == parse_tlv(theirs["26"])[1]


def test_qrcode_pix_vectors_share_our_fields() -> None:
    code = build_br_code(
        pix_key="test@mail.com.br",
        merchant_name="Fulano de Tal",
        merchant_city="SAO PAULO",
        txid="***",
        amount=Decimal("100.99"),
    )
    ours, theirs = dict(parse_tlv(code)), dict(parse_tlv(QRCODE_PIX_VALUE))
    for field_id in ("52", "53", "54", "58", "59", "60"):
        assert ours[field_id] == theirs[field_id]
    assert field(QRCODE_PIX_ONCE, "01") == ours["01"] == "12"


# -- br_code_text and parse_tlv -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "limit", "expected"),
    [
        ("São Paulo", 15, "Sao Paulo"),
        ("Ç", 5, "C"),
        ("Florianópolis", 15, "Florianopolis"),
        ("  Açaí\t\n da   Vó  ", 25, "Acai da Vo"),
        ("São\nPaulo", 15, "Sao Paulo"),
        ("Zürich ☃ Café", 25, "Zurich Cafe"),
        ("東京", 15, ""),
        ("Padaria do João e Família Ltda", 25, "Padaria do Joao e Familia"),
        ("abc defgh", 4, "abc"),  # cut, then stripped again
        ("\uff26\uff55\uff4c\uff41\uff4e\uff4f", 25, "Fulano"),  # full-width, folded by NFKD
    ],
)
def test_br_code_text(value: str, limit: int, expected: str) -> None:
    assert br_code_text(value, limit) == expected


@given(st.text(max_size=80), st.integers(min_value=1, max_value=40))
def test_br_code_text_properties(value: str, limit: int) -> None:
    cleaned = br_code_text(value, limit)
    assert len(cleaned) <= limit
    assert PRINTABLE_ASCII.fullmatch(cleaned)
    assert cleaned == cleaned.strip() and "  " not in cleaned
    assert br_code_text(cleaned, limit) == cleaned


@pytest.mark.parametrize(
    "payload",
    ["0", "000", "0002", "00020", "0002011", "0A0201", "00AB01", "00-101", "000201 0102"],
)
def test_parse_tlv_refuses_malformed_payloads(payload: str) -> None:
    with pytest.raises(ValueError, match="TLV"):
        parse_tlv(payload)


def test_parse_tlv_of_nothing_is_no_fields() -> None:
    assert parse_tlv("") == []


# -- 4. Properties of any code built --------------------------------------------------------------

ACCENTED = "ÁÀÂÃÄÉÊÈÍÎÓÔÕÖÚÜÇÑáàâãäéêèíîóôõöúüçñ"
name_characters = st.one_of(
    st.sampled_from(string.ascii_letters + string.digits + " -&.'"),
    st.sampled_from(ACCENTED),
    st.characters(),  # anything: CJK, emoji, control characters, combining marks
)
names = st.text(name_characters, min_size=1, max_size=60).filter(
    lambda s: br_code_text(s, MERCHANT_NAME_MAX) != ""
)
cities = st.text(name_characters, min_size=1, max_size=40).filter(
    lambda s: br_code_text(s, MERCHANT_CITY_MAX) != ""
)
keys = st.one_of(
    st.uuids().map(str),
    st.emails().filter(lambda e: len(e) <= 77),
    st.text(string.digits, min_size=11, max_size=11),
    st.text(string.digits, min_size=10, max_size=11).map(lambda n: "+55" + n),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=77),
)
txids = st.one_of(
    st.just("***"), st.text(string.ascii_letters + string.digits, min_size=1, max_size=TXID_MAX)
)
amounts = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("999999999.99"), places=2)
mccs = st.text(string.digits, min_size=4, max_size=4)


@given(keys, names, cities, txids, st.none() | amounts, mccs)
def test_any_code_built(
    key: str, name: str, city: str, txid: str, amount: Decimal | None, mcc: str
) -> None:
    code = build_br_code(
        pix_key=key, merchant_name=name, merchant_city=city, txid=txid, amount=amount, mcc=mcc
    )
    assert has_valid_crc(code)
    assert crc16_ccitt_false(code[:-4].encode()) == binascii.crc_hqx(code[:-4].encode(), 0xFFFF)
    fields = parse_tlv(code)
    expected_ids = [i for i in EXPECTED_IDS if amount is not None or i != "54"]
    assert [i for i, _ in fields] == expected_ids
    # Every length prefix is its value's length: the fields reassemble into the same text.
    assert assemble(fields) == code
    assert all(len(value) <= TLV_VALUE_MAX for _, value in fields)
    values = dict(fields)
    assert values["00"] == "01"
    assert values["01"] == "12"
    assert parse_tlv(values["26"]) == [("00", "br.gov.bcb.pix"), ("01", key)]
    assert values["52"] == mcc
    assert values["53"] == "986"
    assert values["58"] == "BR"
    assert values["59"] == br_code_text(name, MERCHANT_NAME_MAX)
    assert values["60"] == br_code_text(city, MERCHANT_CITY_MAX)
    assert 1 <= len(values["59"]) <= MERCHANT_NAME_MAX and PRINTABLE_ASCII.fullmatch(values["59"])
    assert 1 <= len(values["60"]) <= MERCHANT_CITY_MAX and PRINTABLE_ASCII.fullmatch(values["60"])
    assert parse_tlv(values["62"]) == [("05", txid)]
    assert re.fullmatch(r"[0-9A-F]{4}", values["63"])
    if amount is not None:
        assert re.fullmatch(r"[0-9]+\.[0-9]{2}", values["54"])
        assert Decimal(values["54"]) == amount
        assert Decimal(values["54"]).as_tuple().exponent == -2


def test_no_amount_leaves_field_54_out() -> None:
    code = build_br_code(pix_key="k@x.com", merchant_name="A", merchant_city="B", txid="***")
    assert "54" not in dict(parse_tlv(code))


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (Decimal("0.01"), "0.01"),
        (Decimal("1"), "1.00"),
        (Decimal("1.5"), "1.50"),
        (Decimal("1.500"), "1.50"),  # same value, more digits written
        (Decimal("1E+2"), "100.00"),
        (Decimal("9999999999.99"), "9999999999.99"),  # field 54's 13 characters
    ],
)
def test_amount_text(amount: Decimal, text: str) -> None:
    code = build_br_code(
        pix_key="k@x.com", merchant_name="A", merchant_city="B", txid="***", amount=amount
    )
    assert field(code, "54") == text


def test_longest_key_that_fits() -> None:
    code = build_br_code(pix_key="k" * 77, merchant_name="A", merchant_city="B", txid="***")
    assert len(field(code, "26")) == TLV_VALUE_MAX
    assert has_valid_crc(code)


# -- 5. Refusals ----------------------------------------------------------------------------------

VALID: dict[str, Any] = {
    "pix_key": "fulano@example.com",
    "merchant_name": "Fulano de Tal",
    "merchant_city": "BRASILIA",
    "txid": "ABC123",
    "amount": Decimal("10.00"),
}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"merchant_name": ""}, "merchant name"),
        ({"merchant_name": "   \t "}, "merchant name"),
        ({"merchant_name": "東京 ☃"}, "merchant name"),
        ({"merchant_city": ""}, "merchant city"),
        ({"merchant_city": "Москва"}, "merchant city"),
        ({"txid": ""}, "txid"),
        ({"txid": "a" * 26}, "txid"),
        ({"txid": "abc-123"}, "txid"),
        ({"txid": "abc 123"}, "txid"),
        ({"txid": "ação"}, "txid"),
        ({"txid": "\uff11\uff12\uff13"}, "txid"),  # full-width digits are not [0-9]
        ({"txid": "**"}, "txid"),
        ({"txid": "ABC123\n"}, "txid"),
        ({"amount": Decimal("0")}, "positive"),
        ({"amount": Decimal("0.00")}, "positive"),
        ({"amount": Decimal("-1.00")}, "positive"),
        ({"amount": Decimal("NaN")}, "positive"),
        ({"amount": Decimal("Infinity")}, "positive"),
        ({"amount": Decimal("0.001")}, "two decimals"),
        ({"amount": Decimal("1.005")}, "two decimals"),
        ({"amount": Decimal("10000000000.00")}, "13"),
        ({"mcc": "000"}, "4 digits"),
        ({"mcc": "00000"}, "4 digits"),
        ({"mcc": "abcd"}, "4 digits"),
        ({"mcc": "٠١٢٣"}, "4 digits"),  # Arabic-Indic digits
        ({"pix_key": "k" * 78}, "field 26 would have 100 characters"),
        ({"pix_key": ""}, "Pix key"),
        ({"pix_key": "chave@exemplo.com.ção"}, "Pix key"),
    ],
)
def test_refusals(override: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_br_code(**{**VALID, **override})


def test_a_float_amount_is_refused() -> None:
    with pytest.raises(TypeError, match="Decimal"):
        build_br_code(**{**VALID, "amount": 10.0})


def test_latin_letters_without_an_ascii_base_are_written_as_their_languages_write_them() -> None:
    assert br_code_text("Straße Œuvre Ærø Łódź Þór", 99) == "Strasse OEuvre AEro Lodz Thor"
