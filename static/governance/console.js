// Console behaviour that htmx attributes do not cover (keyboard shortcuts).
// Memory text is never interpreted here: pages render it escaped.
