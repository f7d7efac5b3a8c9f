// The review page: one item at a time, by keyboard. y yes, n no, s skip,
// u undo, / to type a note (Esc or Enter leaves it). The next item is
// fetched while one is shown, so a verdict shows the next at once; the
// verdict is sent meanwhile.
"use strict";
(function () {
  const classifier = document.body.dataset.classifier;
  const $ = (id) => document.getElementById(id);
  let current = null; // the item shown
  const pending = new Set(); // ids of items whose verdict is on its way
  let fetching = null; // the promise of the item after the one shown
  let sending = Promise.resolve(); // the verdicts on their way, in order

  function setStatus(text) { $("status").textContent = text; }

  function counts(q) {
    if (typeof q.queued === "number") $("queued").textContent = String(q.queued);
    if (typeof q.reviewed === "number") $("reviewed").textContent = String(q.reviewed);
  }

  function safeURL(u) { return /^https?:\/\//i.test(u) ? u : "#"; }

  function show(item) {
    current = item;
    $("note").value = "";
    if (!item) {
      $("item").hidden = true;
      $("empty").hidden = false;
      return;
    }
    $("item").hidden = false;
    $("empty").hidden = true;
    const d = $("domain");
    d.textContent = item.domain;
    d.href = safeURL(item.url);
    const a = $("answer");
    a.textContent = item.answer ? "yes" : "no";
    a.className = item.answer ? "yes" : "no";
    $("confidence").textContent = String(item.confidence);
    $("reasons").textContent = item.reasons.join(", ");
    $("reasoning").textContent = item.reasoning;
    const disputes = $("disputes");
    disputes.replaceChildren(...item.disputes.map((n) => {
      const li = document.createElement("li");
      li.textContent = n;
      return li;
    }));
    $("evidence").replaceChildren(...item.evidence.map((e) => {
      const li = document.createElement("li");
      const link = document.createElement("a");
      link.href = safeURL(e.url);
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      link.textContent = e.title || e.url;
      const snippet = document.createElement("span");
      snippet.className = "snippet";
      snippet.textContent = e.snippet;
      li.append(link, snippet);
      return li;
    }));
    if (!item.evidence.length) {
      const li = document.createElement("li");
      li.className = "none";
      li.textContent = "none: the model was shown no pages";
      $("evidence").append(li);
    }
    $("answered-at").textContent = item.answered_at.replace("T", " ").slice(0, 16) + " UTC";
    $("model").textContent = item.model;
    $("prompt-version").textContent = item.prompt_version;
    $("search").textContent = item.search;
    $("source").textContent = item.source;
  }

  async function call(method, path, body) {
    const init = { method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    const data = await resp.json().catch(() => ({}));
    if (!resp.ok) throw new Error(data.detail || resp.status + " " + resp.statusText);
    return data;
  }

  // prefetch asks for the item after the one shown, leaving out those
  // whose verdict is on its way.
  function prefetch() {
    const exclude = [...pending];
    if (current) exclude.push(current.id);
    const q = new URLSearchParams({ classifier });
    if (exclude.length) q.set("exclude", exclude.slice(-20).join(","));
    return call("GET", "review/next?" + q).then((data) => { counts(data); return data.item; });
  }

  async function settled() {
    while (pending.size) await new Promise((r) => setTimeout(r, 20));
  }

  async function advance() {
    let item = null;
    try { item = await fetching; } catch (e) { setStatus(e.message); }
    if (item && pending.has(item.id)) item = null;
    show(item);
    fetching = prefetch();
    if (!item) {
      // The queue may have held only the item just judged (a skip): look
      // again once its verdict is in.
      await settled();
      if (current) return;
      fetching = prefetch();
      const again = await fetching.catch(() => null);
      if (again && !current) {
        show(again);
        fetching = prefetch();
      }
    }
  }

  function verdict(v) {
    if (!current || pending.has(current.id)) return;
    const item = current;
    const note = $("note").value;
    pending.add(item.id);
    setStatus(v + ": " + item.domain);
    // One at a time, in the order given: an undo takes back the last.
    sending = sending.then(() => call("POST", "review/items/" + item.id + "/verdict", { verdict: v, note }))
      .then((r) => { counts(r); })
      .catch((e) => setStatus(item.domain + ": " + e.message))
      .finally(() => pending.delete(item.id));
    advance();
  }

  async function undo() {
    // The undo takes back the last verdict: wait for those on their way.
    await settled();
    try {
      const r = await call("POST", "review/undo", {});
      counts(r);
      setStatus("undone: " + r.verdict + " on " + r.domain);
      if (r.item) {
        const shown = current;
        show(r.item);
        fetching = shown ? Promise.resolve(shown) : prefetch();
      }
    } catch (e) {
      setStatus(e.message);
    }
  }

  const note = $("note");
  note.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" || ev.key === "Enter") {
      ev.preventDefault();
      note.blur();
    }
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.target === note || ev.ctrlKey || ev.metaKey || ev.altKey || ev.repeat) return;
    switch (ev.key) {
      case "y": verdict("yes"); break;
      case "n": verdict("no"); break;
      case "s": verdict("skip"); break;
      case "u": undo(); break;
      case "/": break; // the note takes focus as the key comes up, so "/" is not typed in it
      default: return;
    }
    ev.preventDefault();
  });
  document.addEventListener("keyup", (ev) => {
    if (ev.key === "/" && ev.target !== note && current) note.focus();
  });

  const first = JSON.parse($("first").textContent);
  counts(first);
  show(first.item);
  fetching = prefetch();
})();
