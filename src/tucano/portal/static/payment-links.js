// A payment link's page without JavaScript is complete: its checkout URL is text to select and
// copy, its QR code prints with the page. With it, a button copies the URL and one prints.
(function () {
  "use strict";

  function say(status, text) {
    if (status) { status.textContent = text; }
  }

  function selectText(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function copier(button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    var status = button.parentNode.querySelector("[data-copy-status]");
    button.hidden = false;
    button.addEventListener("click", function () {
      var failed = function () {
        selectText(source);
        say(status, button.getAttribute("data-copy-failed"));
      };
      if (!navigator.clipboard || !navigator.clipboard.writeText) { failed(); return; }
      navigator.clipboard.writeText(source.textContent.trim()).then(function () {
        say(status, button.getAttribute("data-copied"));
      }, failed);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var copies = document.querySelectorAll("button[data-copy]");
    for (var i = 0; i < copies.length; i++) { copier(copies[i]); }
    var prints = document.querySelectorAll("button[data-print]");
    for (var j = 0; j < prints.length; j++) {
      prints[j].hidden = false;
      prints[j].addEventListener("click", function () { window.print(); });
    }
  });
})();
