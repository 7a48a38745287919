// A webhook's page shows its signing secret in a read-only field that can be selected and copied
// without JavaScript; with it, a Copy button puts it on the clipboard and says so.
(function () {
  "use strict";

  function copy(button) {
    var field = document.getElementById(button.getAttribute("data-copy"));
    var status = document.getElementById(button.getAttribute("data-status"));
    var say = function (name) { status.textContent = button.getAttribute(name); };
    // Where the clipboard is refused, the secret is left selected for the keyboard's copy.
    var failed = function () {
      field.focus();
      field.select();
      say("data-copy-failed");
    };
    status.textContent = "";
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(field.value).then(function () { say("data-copied"); }, failed);
    } else {
      failed();
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var buttons = document.querySelectorAll("button[data-copy]");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].hidden = false;
      buttons[i].addEventListener("click", function (event) { copy(event.currentTarget); });
    }
  });
})();
