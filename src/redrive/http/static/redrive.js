// The dashboard's one script: lists and counts refresh themselves every 5
// seconds (htmx polling) unless "pause updates" is ticked, or rows are ticked
// for an action (a refresh would untick them). No inline script, no eval:
// the pages' Content-Security-Policy allows scripts from here only.
document.addEventListener("htmx:beforeRequest", (event) => {
  const live = event.detail.elt.closest("[data-live]");
  if (!live) return;
  const paused = document.getElementById("live-pause");
  if ((paused && paused.checked) || live.querySelector("input[type=checkbox]:checked")) {
    event.preventDefault();
  }
});
