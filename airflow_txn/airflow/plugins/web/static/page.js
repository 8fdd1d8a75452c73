// The transactions page's script: the two-click rollback button and the watermark poll.
const ROOT = document.body.dataset.root;
for (const button of document.querySelectorAll("button.rollback")) {
  button.addEventListener("click", async () => {
    const out = document.getElementById("result-" + button.dataset.tid);
    if (!button.classList.contains("armed")) {
      button.classList.add("armed"); button.textContent = "Click again to roll back";
      out.textContent = "every part it staged will be withdrawn";
      return;
    }
    button.disabled = true; out.textContent = "rolling back...";
    const response = await fetch(ROOT + "/api/transactions/" + encodeURIComponent(button.dataset.tid) + "/rollback", {
      method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json"}, body: "{}"});
    const body = await response.json().catch(() => ({}));
    if (response.ok) { out.textContent = "rolled back"; setTimeout(() => location.reload(), 600); }
    else { out.textContent = response.status + ": " + (body.detail || response.statusText); button.disabled = false; }
  });
}
async function refreshWatermark() {
  const response = await fetch(ROOT + "/api/watermark", {credentials: "same-origin"});
  if (response.ok) { document.getElementById("watermark").textContent = (await response.json()).readable_csn; }
}
setInterval(refreshWatermark, 10000);
