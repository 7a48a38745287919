// A webhook's page shows its signing secret in a read-only field that can be selected and copied
// without JavaScript; with it, a Copy button puts it on the clipboard and says so.
(function () {
  "use strict";

  function copy(button) {
    var field = document.getElementById(button.getAttribute("data-copy"));
    var status = document.getElementById(button.getAttribute("data-status"));
    function copied() { status.textContent = button.getAttribute("data-copied"); }
    function byHand() {
      field.focus();
      field.select();
      if (document.execCommand && document.execCommand("copy")) { copied(); }
    }
    status.textContent = "";
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(copied, byHand);
    } else {
      byHand();
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
