// Console behaviour that htmx attributes do not cover (keyboard shortcuts).
// Memory text is never interpreted here: pages render it escaped.

// --- Review queue (issue 3): j/k move, a/r open the reason form, x select ---
// Memory text is only ever read through textContent here, never innerHTML:
// it is attacker-controlled and the server already escaped it.
(function () {
  "use strict";

  function items() {
    return Array.prototype.slice.call(document.querySelectorAll("[data-review-queue] .review-item:not([data-decided])"));
  }

  function current() {
    return document.querySelector("[data-review-queue] .review-item.current");
  }

  function select(item) {
    var previous = current();
    if (previous) previous.classList.remove("current");
    if (!item) return;
    item.classList.add("current");
    item.focus({ preventScroll: true });
    item.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    var list = items();
    if (!list.length) return;
    var index = list.indexOf(current());
    var next = index === -1 ? 0 : Math.min(list.length - 1, Math.max(0, index + step));
    select(list[next]);
  }

  function openReason(action) {
    var item = current() || items()[0];
    if (!item) return;
    select(item);
    var form = item.querySelector("form.decision");
    var reason = form && form.querySelector("[data-reason]");
    if (!reason) return;
    form.setAttribute("data-pending", action);
    reason.focus();
  }

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  document.addEventListener("keydown", function (event) {
    if (!document.querySelector("[data-review-queue]") || event.altKey || event.metaKey) return;
    var target = event.target;
    if (typing(target)) {
      var form = target.closest && target.closest("form.decision");
      if (form && event.key === "Enter" && event.ctrlKey) {
        // click(), not requestSubmit(): htmx sends the clicked button's action with the form.
        var button = form.querySelector('button[data-action="' + (form.getAttribute("data-pending") || "approve") + '"]');
        if (button) { event.preventDefault(); button.click(); }
      } else if (event.key === "Escape") {
        if (form) form.removeAttribute("data-pending");
        target.blur();
        var item = target.closest && target.closest(".review-item");
        if (item) select(item);
      }
      return;
    }
    if (event.ctrlKey) return;
    var handled = true;
    if (event.key === "j") move(1);
    else if (event.key === "k") move(-1);
    else if (event.key === "a") openReason("approve");
    else if (event.key === "r") openReason("reject");
    else if (event.key === "x") {
      var box = current() && current().querySelector('input[type="checkbox"][name="write"]');
      if (box) box.checked = !box.checked;
    } else handled = false;
    if (handled) event.preventDefault();
  });

  // Clicking into an item makes it the current one, so the keys act on what the reviewer looks at.
  document.addEventListener("click", function (event) {
    var item = event.target.closest && event.target.closest("[data-review-queue] .review-item:not([data-decided])");
    if (item && item !== current()) {
      var previous = current();
      if (previous) previous.classList.remove("current");
      item.classList.add("current");
    }
  });

  // A form that fails validation (400) or lost a race (409) answers with a
  // fragment meant to be shown: swap it instead of dropping it as an error.
  // After a decision, the item that followed the decided one becomes current,
  // so j/k/a/r keep flowing.
  var nextAfterSwap = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    var status = event.detail.xhr && event.detail.xhr.status;
    var source = event.detail.requestConfig && event.detail.requestConfig.elt;
    if ((status === 400 || status === 409) && source && source.closest && source.closest("[data-swap-errors]")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
    var target = event.detail.target;
    nextAfterSwap = null;
    if (target && target.matches && target.matches("[data-review-queue] .review-item.current")) {
      var list = items();
      var following = list[list.indexOf(target) + 1];
      nextAfterSwap = following ? following.id : null;
    }
  });

  document.addEventListener("htmx:afterSettle", function () {
    if (!nextAfterSwap || current()) return;
    var next = document.getElementById(nextAfterSwap);
    nextAfterSwap = null;
    if (next && !next.hasAttribute("data-decided")) select(next);
  });
})();
