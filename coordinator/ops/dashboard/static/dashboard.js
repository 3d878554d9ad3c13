// groupcoord dashboard: the few things a page does on its own (no framework, no build step).
"use strict";

// A filter box narrows a table to the rows whose data-search text holds every typed word.
function setUpFilter(input) {
  var table = document.getElementById(input.getAttribute("data-filter"));
  if (!table) return;
  var apply = function () {
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    table.querySelectorAll("tbody tr").forEach(function (row) {
      var text = row.getAttribute("data-search") || row.textContent.toLowerCase();
      row.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
    });
  };
  input.addEventListener("input", apply);
  apply();
}

// The reset form shows the hint of the chosen scenario and enables its value field only when it takes one.
function setUpResetForm(select) {
  var value = document.getElementById("scenario-value");
  var hints = document.querySelectorAll(".hints .hint");
  var apply = function () {
    var takesValue = false;
    hints.forEach(function (hint) {
      var shown = hint.getAttribute("data-scenario") === select.value;
      hint.classList.toggle("shown", shown);
      takesValue = takesValue || shown;
    });
    if (value) value.disabled = !takesValue;
  };
  select.addEventListener("change", apply);
  apply();
}

// Execute commits the plan previewed: once a field changes, it waits for a new preview.
function setUpExecuteGuard(form) {
  var execute = form.querySelector("button[value=execute]");
  if (!execute) return;
  var stale = function () { execute.disabled = true; };
  form.addEventListener("input", stale);
  form.addEventListener("change", stale);
}

document.addEventListener("DOMContentLoaded", function () {
  var resetForm = document.getElementById("reset-form");
  if (resetForm) setUpExecuteGuard(resetForm);
  document.querySelectorAll("input[data-filter]").forEach(setUpFilter);
  var scenario = document.getElementById("scenario");
  if (scenario) setUpResetForm(scenario);
});
