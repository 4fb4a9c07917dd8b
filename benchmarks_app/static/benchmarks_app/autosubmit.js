// A <select data-autosubmit> submits its form when changed (instead of an inline onchange
// handler, which the Content-Security-Policy refuses).
(function () {
  "use strict";
  document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
    select.addEventListener("change", function () {
      if (select.form) select.form.submit();
    });
  });
})();
