// The rag web page: POST /stream, read server-sent events, render answer, sources and support.
// Plain JavaScript, no dependencies; all server text is inserted as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { answer: "", sources: [], support: null, cited: new Set() };

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

function authHeaders() {
  const token = $("token").value.trim();
  return token ? { Authorization: "Bearer " + token } : {};
}

function showToken() {
  $("token").hidden = false;
  $("token-label").hidden = false;
  $("options").open = true;
  $("token").focus();
}

async function loadResources() {
  try {
    const res = await fetch("/resources", { headers: authHeaders() });
    if (res.status === 401) { showToken(); return; }
    if (!res.ok) return;
    const data = await res.json();
    const box = $("resources");
    box.textContent = "Searching: ";
    data.resources.forEach((r, i) => {
      const code = document.createElement("code");
      code.textContent = r.name;
      if (r.description) code.title = r.description;
      box.append(i ? ", " : "", code);
    });
    $("k").max = data.limits.max_k;
  } catch (err) { /* the page still works without the list */ }
}

// Text with [n] markers turned into links to the numbered sources.
function withCitations(text) {
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const m of text.matchAll(/\[(\d{1,4})\]/g)) {
    frag.append(text.slice(last, m.index));
    const n = Number(m[1]);
    if (state.sources.some((s) => sourceId(s) === n)) {
      const a = document.createElement("a");
      a.className = "cite";
      a.href = "#source-" + n;
      a.textContent = "[" + n + "]";
      frag.append(a);
      state.cited.add(n);
    } else {
      frag.append(m[0]);
    }
    last = m.index + m[0].length;
  }
  frag.append(text.slice(last));
  return frag;
}

const sourceId = (s) => Number(s.n ?? s.id);

// "Quoted from the source" and "answers the question" are separate signals: a sentence the checks
// found not to answer the question is never coloured as supported, whatever its support score.
function supportClass(item) {
  const label = String(item.label || "").toLowerCase();
  if (item.answers === false && label !== "no_answer") return "support-off";
  if (label === "supported") return "support-high";
  if (label === "partial") return "support-mid";
  if (label === "unsupported") return "support-low";
  if (label === "no_answer") return "support-none";
  const score = Number(item.score);
  if (score >= 0.66) return "support-high";
  if (score >= 0.33) return "support-mid";
  return "support-low";
}

function renderAnswer() {
  const box = $("answer");
  box.replaceChildren();
  state.cited.clear();
  if (state.support && state.support.length) {
    state.support.forEach((item, i) => {
      const span = document.createElement("span");
      span.className = "sentence " + supportClass(item);
      if (item.score !== undefined) span.title = sentenceTitle(item);
      if (item.score !== undefined) span.dataset.score = Number(item.score).toFixed(2);
      span.dataset.label = item.label || "";
      span.append(withCitations(String(item.sentence ?? item.text ?? "")));
      for (const n of item.citations || []) span.append(" ", withCitations("[" + n + "]"));
      box.append(i ? " " : "", span);
    });
    $("legend").hidden = false;
  } else {
    box.append(withCitations(state.answer));
  }
  markCitedSources();
}

// Sources the answer (or its closest passage) cites are marked and listed first.
function markCitedSources() {
  document.querySelectorAll("#sources li[data-id]").forEach((li) => {
    li.classList.toggle("cited", state.cited.has(Number(li.dataset.id)));
  });
  orderSources();
}

// What the answer's fields say beyond its text: the closest passage of a not-sure answer, the
// checks' warnings (an answer that cites nothing or that its sources do not support), who answered.
const WARNINGS = {
  uncited_sentences: "The answer cites no source for some of its sentences.",
  unsupported_sentences: "Some sentences are not supported by the sources they cite.",
  does_not_answer: "The answer may not answer the question.",
  suspected_injection: "A source holds instructions aimed at the model; it was not used as evidence.",
};

function renderDone(event) {
  const flags = (event.flags || []).filter((f) => WARNINGS[f] && (!event.refused || f === "suspected_injection"));
  $("warnings").textContent = flags.map((f) => WARNINGS[f]).join(" ");
  $("warnings").hidden = !flags.length;
  const passage = event.passage;
  $("passage").replaceChildren();
  if (passage && passage.text) {
    $("passage").append("Closest passage ", withCitations("[" + passage.n + "]"), " " + (passage.label || "") + ": ",
                        String(passage.text));
    state.cited.add(Number(passage.n));
    markCitedSources();
  }
  $("passage").hidden = !(passage && passage.text);
  $("answerer").textContent = event.answerer ? "Answered by " + event.answerer + "." : "";
  $("answerer").hidden = !event.answerer;
  if (event.refused || flags.length) $("answer").classList.add("support-off");
}

function sentenceTitle(item) {
  const parts = [(item.quoted ? "quoted from source " : "support from source ") + (item.chunk ?? "-") +
                 " (" + Number(item.score).toFixed(2) + ")"];
  if (item.answers === true) parts.push("answers the question");
  if (item.answers === false) parts.push("does not answer the question");
  return parts.join("; ");
}

// The cited sources first, then the ones retrieved but not used, under their own heading.
function orderSources() {
  const list = $("sources");
  list.querySelectorAll("li.unused-heading").forEach((li) => li.remove());
  const items = [...list.querySelectorAll("li[data-id]")];
  if (!state.cited.size) return;
  const used = items.filter((li) => state.cited.has(Number(li.dataset.id)));
  const unused = items.filter((li) => !state.cited.has(Number(li.dataset.id)));
  list.append(...used);
  if (unused.length) {
    const heading = document.createElement("li");
    heading.className = "unused-heading";
    heading.textContent = "Retrieved, not used in the answer";
    list.append(heading, ...unused);
  }
  unused.forEach((li) => li.classList.add("unused"));
}

function renderSources() {
  const list = $("sources");
  list.replaceChildren();
  for (const s of state.sources) {
    const li = document.createElement("li");
    li.id = "source-" + sourceId(s);
    li.dataset.id = sourceId(s);
    const num = document.createElement("span");
    num.className = "num";
    num.textContent = "[" + sourceId(s) + "]";
    const label = document.createElement("span");
    label.className = "label";
    label.textContent = s.label;
    const resource = document.createElement("span");
    resource.className = "resource";
    resource.textContent = s.resource || "";
    const text = document.createElement("p");
    text.className = "text";
    text.textContent = s.content ?? s.text ?? "";
    li.append(num, label, resource, text);
    list.append(li);
  }
  $("sources-section").hidden = state.sources.length === 0;
}

function handleEvent(event) {
  switch (event.type) {
    case "sources":
      state.sources = event.sources || [];
      renderSources();
      setStatus(state.sources.length ? "Writing the answer…" : "No sources matched; answering anyway…");
      break;
    case "token":
      state.answer += event.text || "";
      $("answer").textContent = state.answer;
      break;
    case "citations":
      if (typeof event.answer === "string") state.answer = event.answer;  // dangling [n] removed
      renderAnswer();
      if (event.invalid && event.invalid.length) {
        $("invalid").textContent = "Citations that point at no source were ignored: " +
          event.invalid.map((n) => "[" + n + "]").join(", ");
        $("invalid").hidden = false;
      }
      break;
    case "support":
      state.support = event.sentences || event.support || [];
      renderAnswer();
      break;
    case "done":
      if (event.answer !== undefined && !state.support) { state.answer = event.answer; }
      renderAnswer();
      renderDone(event);
      setStatus("Done: " + state.sources.length + " source(s).");
      break;
    case "error":
      setStatus("Error: " + ((event.error && event.error.message) || "the answer failed"), true);
      break;
    default:
      break;  // usage and future event types are not shown
  }
}

async function ask(evt) {
  evt.preventDefault();
  const body = { question: $("question").value.trim() };
  if (!body.question) return;
  if ($("k").value) body.k = Number($("k").value);
  const rawFilter = $("filter").value.trim();
  if (rawFilter) {
    try { body.filter = JSON.parse(rawFilter); } catch (err) {
      setStatus("The filter is not valid JSON: " + err.message, true);
      return;
    }
  }
  Object.assign(state, { answer: "", sources: [], support: null });
  for (const id of ["warnings", "passage", "answerer"]) $(id).hidden = true;
  $("answer").classList.remove("support-off");
  $("answer").replaceChildren();
  $("legend").hidden = true;
  $("invalid").hidden = true;
  $("answer-section").hidden = false;
  renderSources();
  $("ask").disabled = true;
  setStatus("Searching…");
  try {
    const res = await fetch("/stream", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream", ...authHeaders() },
      body: JSON.stringify(body),
    });
    if (!res.ok) {
      let message = res.status + " " + res.statusText;
      try { message = (await res.json()).error.message; } catch (err) { /* keep the status line */ }
      if (res.status === 401) showToken();
      setStatus("Error: " + message, true);
      $("answer-section").hidden = true;
      return;
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
        if (data) handleEvent(JSON.parse(data));
      }
    }
  } catch (err) {
    setStatus("Error: " + err.message, true);
  } finally {
    $("ask").disabled = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask-form").addEventListener("submit", ask);
  loadResources();
});
