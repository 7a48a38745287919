// The checkout without JavaScript is complete (plain forms, a refresh link). With it, the page
// copies the Pix code, names the card's brand as it is typed, and turns into the receipt as
// soon as the link is paid, without a reload.
(function () {
  "use strict";

  // The brands' issuer ranges of the first six digits, [name, [[low, high], ...], CVV digits],
  // most specific first: the server's own table (cards.py), carried by the number's input.
  function brandTable(number) {
    try {
      return JSON.parse(number.getAttribute("data-brands") || "[]");
    } catch (error) {
      return [];
    }
  }

  function brandOf(brands, digits) {
    if (digits.length < 6) { return null; }
    var prefix = parseInt(digits.slice(0, 6), 10);
    for (var i = 0; i < brands.length; i++) {
      var ranges = brands[i][1];
      for (var j = 0; j < ranges.length; j++) {
        if (ranges[j][0] <= prefix && prefix <= ranges[j][1]) { return brands[i]; }
      }
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
    var brands = brandTable(number);
    number.addEventListener("input", function () {
      var digits = number.value.replace(/\D/g, "").slice(0, 19);
      var brand = brandOf(brands, digits);
      var name = brand ? brand[0] : null;
      var atEnd = number.selectionStart === number.value.length;
      number.value = grouped(digits, name);
      if (atEnd) { number.setSelectionRange(number.value.length, number.value.length); }
      brandLine.textContent = name
        ? brandLine.getAttribute("data-template").replace("{brand}", name) : "";
      if (code) { code.maxLength = brand ? brand[2] : 4; }
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

  // A refused or invalid form's page: its alert, or the first field to correct, in the middle of
  // the screen and focused (autofocus does it without JavaScript; this makes sure of it).
  function showWhatWentWrong() {
    var target = document.querySelector("[data-focus]");
    if (!target) { return; }
    target.focus({ preventScroll: true });
    target.scrollIntoView({ block: "center" });
  }

  document.addEventListener("DOMContentLoaded", function () {
    showWhatWentWrong();
    setUpCopy(document);
    setUpCard(document);
    watchPayment();
  });
}());
