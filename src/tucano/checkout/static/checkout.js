// The checkout without JavaScript is complete (plain forms, a refresh link). With it, the page
// copies the PIX code, names the card's brand as it is typed, and turns into the receipt as
// soon as the link is paid, without a reload.
(function () {
  "use strict";

  var BRANDS = [
    ["Elo", /^(401178|401179|431274|438935|451416|457393|45763[12]|504175|506(699|7[0-7][0-9])|509[0-9]{3}|627780|636297|636368|6500(3[1-3]|3[5-9]|4[0-9]|5[01])|650(40[5-9]|4[1-3][0-9]|48[5-9]|49[0-9]|5[0-2][0-9]|53[0-8]|54[1-9]|5[5-8][0-9]|59[0-8]|70[0-9]|71[0-8]|72[0-7]|90[1-9]|9[1-6][0-9]|97[0-8])|6516(5[2-9]|6[0-9]|7[0-9])|6550([01][0-9]|2[1-9]|[34][0-9]|5[0-8]))/],
    ["Hipercard", /^(384100|384140|384160|606282|637095|637568|637599|637609|637612)/],
    ["American Express", /^3[47]/],
    ["Diners Club", /^(30[0-5]|36|3[89])/],
    ["JCB", /^35(2[89]|[3-8][0-9])/],
    ["Discover", /^(6011|64[4-9]|65)/],
    ["Mastercard", /^(5[1-5]|222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)/],
    ["Visa", /^4/]
  ];

  function brandOf(digits) {
    for (var i = 0; i < BRANDS.length; i++) {
      if (BRANDS[i][1].test(digits)) { return BRANDS[i][0]; }
    }
    return null;
  }

  function grouped(digits, brand) {
    var sizes = brand === "American Express" ? [4, 6, 5] : [4, 4, 4, 4, 3];
    var parts = [], at = 0;
    for (var i = 0; i < sizes.length && at < digits.length; i++) {
      parts.push(digits.slice(at, at + sizes[i]));
      at += sizes[i];
    }
    return parts.join(" ");
  }

  function setUpCopy(root) {
    var button = root.querySelector("[data-copy]");
    var code = root.querySelector("[data-pix-code]");
    var status = root.querySelector("[data-copy-status]");
    if (!button || !code) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = code.textContent.trim();
      var done = function () { status.textContent = button.getAttribute("data-copied"); };
      var failed = function () {
        var range = document.createRange();
        range.selectNodeContents(code);
        var selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        status.textContent = button.getAttribute("data-copy-failed");
      };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, failed);
      } else {
        failed();
      }
    });
  }

  function setUpCard(root) {
    var number = root.querySelector("#card-number");
    var brandLine = root.querySelector("[data-card-brand]");
    var code = root.querySelector("#card-security-code");
    if (!number) { return; }
    number.addEventListener("input", function () {
      var digits = number.value.replace(/\D/g, "").slice(0, 19);
      var brand = brandOf(digits);
      var atEnd = number.selectionStart === number.value.length;
      number.value = grouped(digits, brand);
      if (atEnd) { number.setSelectionRange(number.value.length, number.value.length); }
      brandLine.textContent = brand && digits.length >= 4
        ? brandLine.getAttribute("data-template").replace("{brand}", brand) : "";
      if (code) { code.maxLength = brand === "American Express" ? 4 : brand ? 3 : 4; }
    });
    var expiry = root.querySelector("#card-expiry");
    if (expiry) {
      expiry.addEventListener("input", function () {
        var digits = expiry.value.replace(/\D/g, "").slice(0, 4);
        expiry.value = digits.length > 2 ? digits.slice(0, 2) + "/" + digits.slice(2) : digits;
      });
    }
  }

  function watchPayment() {
    var panel = document.querySelector("[data-checkout]");
    if (!panel) { return; }
    var statusUrl = panel.getAttribute("data-status-url");
    var pageUrl = panel.getAttribute("data-page-url");
    var timer = null, swapping = false;

    function swapIn() {
      swapping = true;
      return fetch(pageUrl, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (answer) { return answer.text(); })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html");
          var main = fresh.querySelector("main");
          if (!main) { return; }
          document.querySelector("main").innerHTML = main.innerHTML;
          document.title = fresh.title;
          var heading = document.querySelector("main h1");
          if (heading) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
        });
    }

    function check() {
      timer = null;
      if (swapping) { return; }
      fetch(statusUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (answer) {
          if (answer.status === 410 || answer.status === 404) { return swapIn(); }
          return answer.json().then(function (body) {
            if (body.status !== "CREATED") { return swapIn(); }
            schedule(3000);
          });
        })
        .catch(function () { schedule(6000); });
    }

    function schedule(delay) {
      if (timer === null && !swapping) { timer = window.setTimeout(check, delay); }
    }

    var simulate = document.querySelector("[data-simulate]");
    if (simulate) {
      simulate.addEventListener("submit", function (event) {
        event.preventDefault();
        var button = simulate.querySelector("button");
        button.disabled = true;
        fetch(simulate.action, {
          method: "POST",
          credentials: "same-origin",
          body: new URLSearchParams(new FormData(simulate))
        }).then(function () {
          if (timer !== null) { window.clearTimeout(timer); timer = null; }
          check();
        }, function () { button.disabled = false; });
      });
    }
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden && timer !== null) { window.clearTimeout(timer); timer = null; check(); }
    });
    schedule(3000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    setUpCopy(document);
    setUpCard(document);
    watchPayment();
  });
}());
