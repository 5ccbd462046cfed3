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

  // The triage list's row of the current write is marked, so the list follows j/k and clicks.
  function markRow(item) {
    Array.prototype.forEach.call(document.querySelectorAll("[data-row][aria-current]"), function (row) {
      row.removeAttribute("aria-current");
    });
    var row = item && document.querySelector('[data-row="' + item.getAttribute("data-write") + '"]');
    if (row) row.setAttribute("aria-current", "true");
  }

  function select(item) {
    var previous = current();
    if (previous) previous.classList.remove("current");
    markRow(item);
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
    var row = event.target.closest && event.target.closest("[data-review-queue] [data-row]");
    var target = row && document.getElementById("write-" + row.getAttribute("data-row"));
    if (target) {
      event.preventDefault();
      if (target.hasAttribute("data-decided")) target.scrollIntoView({ block: "nearest" });
      else select(target);
      return;
    }
    var item = event.target.closest && event.target.closest("[data-review-queue] .review-item:not([data-decided])");
    if (item && item !== current()) {
      var previous = current();
      if (previous) previous.classList.remove("current");
      item.classList.add("current");
      markRow(item);
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
    // The similar facts arrive on their own (out of band, into their boxes):
    // they must not cancel the move to the next item of a decision meanwhile.
    // A card decided while they were on the way has no box left for them:
    // its part of the answer is dropped here rather than left for htmx to
    // report as a swap with no target.
    if (source && source.hasAttribute && source.hasAttribute("data-similar-loader")) {
      var answer = document.createElement("template");
      answer.innerHTML = event.detail.serverResponse;
      answer.content.querySelectorAll("[hx-swap-oob][id]").forEach(function (box) {
        if (!document.getElementById(box.id)) box.remove();
      });
      event.detail.serverResponse = answer.innerHTML;
      return;
    }
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

// --- Errors of in-page requests are shown where the action was, never over the page ---
// htmx drops error responses by default; the forms that answer 400/409 with a
// fragment opt in with data-swap-errors (above). Everything else (403, 404,
// 5xx, a lost connection) leaves the page as it was and says so next to the
// control that was used, so nothing typed is lost.
(function () {
  "use strict";

  var MESSAGES = {
    400: "This was not accepted: check the form and try again.",
    403: "Your role in this project does not allow this. Nothing was changed.",
    404: "This no longer exists or is not in your projects. Nothing was changed.",
    409: "Someone else changed this meanwhile. Reload the page to see the current state.",
    413: "That is too large to send.",
    429: "Too many requests just now: wait a moment and try again.",
    // The database is out of reach (a restart): a change may have been saved
    // just before it went, so this one does not promise that nothing was.
    503: "The service cannot reach its database right now. Try again in a few seconds, then check whether your change was saved.",
  };

  function messageFor(status) {
    if (MESSAGES[status]) return MESSAGES[status];
    if (status >= 500) return "Something went wrong on our side. Nothing was changed; try again in a moment.";
    return "The request failed (status " + status + "). Nothing was changed.";
  }

  function show(source, text) {
    var host = source && source.closest ? source.closest("form, [data-error-host], .card, section") : null;
    var slot;
    if (host) {
      slot = host.querySelector(":scope > [data-htmx-error]");
      if (!slot) {
        slot = document.createElement("p");
        slot.className = "error htmx-error";
        slot.setAttribute("role", "alert");
        slot.setAttribute("data-htmx-error", "");
        host.insertBefore(slot, host.firstChild);
      }
    } else {
      slot = document.getElementById("htmx-error");
      if (!slot) return;
      slot.hidden = false;
    }
    slot.textContent = text;  // text only: never markup from a response
  }

  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    show(event.detail.elt, messageFor(xhr ? xhr.status : 0));
  });

  document.addEventListener("htmx:sendError", function (event) {
    show(event.detail.elt, "The server could not be reached. Nothing was changed; try again.");
  });

  // A new request from the same place clears the old message.
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    var host = elt && elt.closest ? elt.closest("form, [data-error-host], .card, section") : null;
    var slot = host && host.querySelector(":scope > [data-htmx-error]");
    if (slot) slot.remove();
  });
})();

// --- Undo after a review decision: the button goes when the window closes ---
// The server refuses a late undo anyway (services.reviews.undo); this only
// removes a button that would no longer work, and counts the seconds down.
(function () {
  "use strict";
  function arm(root) {
    Array.prototype.forEach.call(root.querySelectorAll("[data-undo-seconds]"), function (form) {
      if (form.hasAttribute("data-armed")) return;
      form.setAttribute("data-armed", "");
      var until = Date.now() + Number(form.getAttribute("data-undo-seconds")) * 1000;
      var left = form.querySelector("[data-undo-left]");
      var timer = null;
      function tick() {
        var seconds = Math.ceil((until - Date.now()) / 1000);
        if (seconds <= 0 || !form.isConnected) {
          clearInterval(timer);
          if (!form.isConnected) return;
          var closed = document.createElement("p");
          closed.className = "muted";
          closed.setAttribute("data-undo-closed", "");
          closed.textContent = "This decision is final: the time to undo it has passed.";
          form.replaceWith(closed);
          return;
        }
        if (left) left.textContent = "You can undo this for " + seconds + " more second" + (seconds === 1 ? "" : "s") + ".";
      }
      timer = setInterval(tick, 250);
      tick();
    });
  }
  document.addEventListener("htmx:load", function (event) {
    arm(event.detail.elt.parentNode || document);
  });
  arm(document);
})();

// --- Audit hashes: shown shortened; a click (or Enter) copies the full hash ---
(function () {
  "use strict";
  function copy(el) {
    var full = el.getAttribute("data-hash");
    if (!full || !navigator.clipboard) return;
    navigator.clipboard.writeText(full).then(function () {
      el.setAttribute("data-copied", "");
      el.title = "Copied: " + full;
    });
  }
  document.addEventListener("click", function (event) {
    var el = event.target.closest && event.target.closest("code.hash[data-hash]");
    if (el) copy(el);
  });
  document.addEventListener("keydown", function (event) {
    var el = event.target.closest && event.target.closest("code.hash[data-hash]");
    if (el && event.key === "Enter") copy(el);
  });
})();

// --- Main menu on narrow screens: a button opens it; without JavaScript it simply wraps ---
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  var button = document.querySelector("header.top .menu-button");
  var nav = document.getElementById("main-nav");
  if (!button || !nav) return;
  button.hidden = false;
  button.addEventListener("click", function () {
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", open ? "true" : "false");
    document.querySelector("header.top").classList.toggle("menu-open", open);
  });
})();
