"""The Page shape of spec 2.2, shared by every list operation, and its `page`/`size` parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Generic, TypeVar

from fastapi import Depends, Query

from tucano.api.wire import ApiModel, WholeNumber
from tucano.core.paging import PageRequest

T = TypeVar("T")

MAX_PAGE_SIZE = 100
# Far beyond any real listing, and keeps page * size inside a 64-bit SQL OFFSET.
MAX_PAGE_NUMBER = 2**31 - 1


class Page(ApiModel, Generic[T]):
    content: list[T]
    total_elements: int
    total_pages: int
    size: int
    number: int
    first: bool
    last: bool
    empty: bool

    @classmethod
    def of(cls, content: Sequence[T], *, total: int, page: int, size: int) -> Page[T]:
        total_pages = -(-total // size)
        return cls(
            content=list(content),
            total_elements=total,
            total_pages=total_pages,
            size=size,
            number=page,
            # Spec 2.2: "An empty result has ... first true, last true", whichever page was asked.
            first=page == 0 or total == 0,
            last=page + 1 >= total_pages,
            empty=len(content) == 0,
        )


async def page_request(
    page: Annotated[
        WholeNumber, Query(ge=0, le=MAX_PAGE_NUMBER, description="Zero-based page number.")
    ] = 0,
    size: Annotated[
        WholeNumber,
        Query(ge=1, le=MAX_PAGE_SIZE, description=f"Page size, 1 to {MAX_PAGE_SIZE}."),
    ] = 20,
) -> PageRequest:
    return PageRequest(page=page, size=size)


PageParams = Annotated[PageRequest, Depends(page_request)]
