// Loaded on pages for signed-out visitors (the login page, where logout lands).
// htmx keeps snapshots of visited pages for the back button in sessionStorage
// (htmx 2) or localStorage (htmx 1); the console turns them off, and this
// removes any left from before, so the next person at this browser cannot
// page back through someone else's memory data. An external file, not an
// inline script, so a strict Content-Security-Policy can forbid inline code.
(function () {
  "use strict";
  var KEY = "htmx-history-cache";
  [window.sessionStorage, window.localStorage].forEach(function (store) {
    try {
      if (store) store.removeItem(KEY);
    } catch (e) {
      // Storage may be disabled (private mode, policy): nothing to clear then.
    }
  });
  try {
    if (window.sessionStorage) window.sessionStorage.clear();
  } catch (e) {
    // As above.
  }
})();
