// The portal without JavaScript is complete (plain links and forms). With it, an action that
// switches something off asks first, and tables stack as cards on a phone.
(function () {
  "use strict";

  function askBeforeSubmitting(form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) { event.preventDefault(); }
    });
  }

  function setRole(elements, role) {
    for (var i = 0; i < elements.length; i++) { elements[i].setAttribute("role", role); }
  }

  // Each cell repeats its column's header, for the stacked layout of portal.css. The roles say
  // what the elements are, which a browser may stop telling assistive technology once their
  // display is no longer a table's.
  function labelCells(table) {
    var headers = table.querySelectorAll("thead th");
    var rows = table.querySelectorAll("tbody tr");
    for (var i = 0; i < rows.length; i++) {
      var cells = rows[i].children;
      for (var j = 0; j < cells.length && j < headers.length; j++) {
        cells[j].setAttribute("data-label", headers[j].textContent);
      }
    }
    table.setAttribute("role", "table");
    setRole(table.querySelectorAll("thead, tbody"), "rowgroup");
    setRole(table.querySelectorAll("tr"), "row");
    setRole(table.querySelectorAll("thead th"), "columnheader");
    setRole(table.querySelectorAll("tbody td"), "cell");
    table.classList.add("stacks");
  }

  document.addEventListener("DOMContentLoaded", function () {
    var forms = document.querySelectorAll("form[data-confirm]");
    for (var i = 0; i < forms.length; i++) { askBeforeSubmitting(forms[i]); }
    var tables = document.querySelectorAll("table");
    for (var j = 0; j < tables.length; j++) { labelCells(tables[j]); }
  });
})();
