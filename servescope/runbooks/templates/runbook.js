const labels = JSON.parse(document.getElementById("labels").textContent);
for (const button of document.querySelectorAll("button.run")) {
  button.addEventListener("click", async () => {
    const step = button.dataset.step;
    const out = document.getElementById("out-" + step);
    const box = document.getElementById("exec-" + step);
    const execute = box !== null && box.checked;
    const sent = Object.entries(labels).map(([k, v]) => "  " + k + "=" + JSON.stringify(v)).join("\n");
    const question = "Execute step " + step + " for real?\n\n" + button.dataset.call +
      "\n\nwith the alert labels:\n" + (sent || "  (none)");
    if (execute && !confirm(question)) { return; }
    const headers = {"Content-Type": "application/json"};
    const token = document.getElementById("token").value.trim();
    if (button.dataset.kind === "change" && token) { headers["Authorization"] = "Bearer " + token; }
    out.hidden = false;
    out.textContent = "running...";
    button.disabled = true;
    try {
      const answer = await fetch(button.dataset.url, {
        method: "POST", headers: headers, body: JSON.stringify({labels: labels, execute: execute})});
      const body = await answer.json().catch(() => ({}));
      if (answer.ok) {
        const dry = body.kind === "change" && body.dry_run ? " (dry run)" : "";
        const status = (body.ok ? "OK" : "FAILED") + dry;
        out.textContent = status + "\n" + (body.output || "");
      } else {
        out.textContent = "HTTP " + answer.status + ": " + (body.detail || answer.statusText);
      }
    } catch (error) {
      out.textContent = "request failed: " + error;
    } finally {
      button.disabled = false;
    }
  });
}
for (const box of document.querySelectorAll("input.execute")) {
  box.addEventListener("change", () => {
    const button = document.getElementById("run-" + box.dataset.step);
    button.textContent = box.checked ? "Execute" : "Dry run";
  });
}
