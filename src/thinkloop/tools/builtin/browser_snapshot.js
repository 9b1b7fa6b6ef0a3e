() => {
  // Accessibility-style outline of the visible page. Interactive elements get a ref
  // (data-tlref) that the click and type tools use to find them again.
  for (const el of document.querySelectorAll("[data-tlref]")) el.removeAttribute("data-tlref");
  let next = 0;
  const lines = [];
  const HEADINGS = { H1: 1, H2: 2, H3: 3, H4: 4, H5: 5, H6: 6 };
  const INPUT_ROLES = {
    submit: "button", button: "button", reset: "button", image: "button",
    checkbox: "checkbox", radio: "radio", range: "slider", search: "searchbox",
  };
  const INTERACTIVE = new Set([
    "link", "button", "textbox", "searchbox", "checkbox", "radio", "combobox", "slider",
    "menuitem", "tab", "option", "switch",
  ]);
  const visible = (el) => {
    const s = getComputedStyle(el);
    if (s.display === "none" || s.visibility === "hidden") return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 || r.height > 0 || el.tagName === "OPTION";
  };
  const roleOf = (el) => {
    const explicit = el.getAttribute("role");
    if (explicit) return explicit;
    const tag = el.tagName;
    if (tag === "A" && el.hasAttribute("href")) return "link";
    if (tag === "BUTTON") return "button";
    if (tag === "INPUT") {
      const t = (el.getAttribute("type") || "text").toLowerCase();
      if (t === "hidden") return null;
      return INPUT_ROLES[t] || "textbox";
    }
    if (tag === "TEXTAREA") return "textbox";
    if (tag === "SELECT") return "combobox";
    if (tag === "IMG") return "img";
    if (tag in HEADINGS) return "heading";
    if (tag === "P") return "paragraph";
    if (tag === "LI") return "listitem";
    if (tag === "FORM") return "form";
    if (tag === "NAV") return "navigation";
    if (tag === "MAIN") return "main";
    if (el.isContentEditable && el.parentElement && !el.parentElement.isContentEditable)
      return "textbox";
    return null;
  };
  const clip = (s) => {
    const t = (s || "").replace(/\s+/g, " ").trim();
    return t.length > 100 ? t.slice(0, 97) + "..." : t;
  };
  const nameOf = (el, role) => {
    const label = el.getAttribute("aria-label");
    if (label) return clip(label);
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const ref = document.getElementById(by);
      if (ref) return clip(ref.innerText);
    }
    if (el.labels && el.labels.length) return clip(el.labels[0].innerText);
    if (role === "img") return clip(el.getAttribute("alt"));
    if (el.tagName === "INPUT" || el.tagName === "TEXTAREA") {
      return clip(el.getAttribute("placeholder") || el.getAttribute("title") ||
                  (["submit", "button", "reset"].includes(el.type) ? el.value : ""));
    }
    if (role === "form" || role === "navigation" || role === "main") return "";
    return clip(el.innerText || el.getAttribute("title") || "");
  };
  const LEAF = new Set(["link", "button", "heading", "paragraph", "img", "textbox",
                        "searchbox", "checkbox", "radio", "combobox", "slider"]);
  const walk = (el, depth) => {
    if (!(el instanceof Element) || !visible(el)) return;
    const role = roleOf(el);
    let childDepth = depth;
    if (role) {
      let line = `${"  ".repeat(depth)}- ${role}`;
      const name = nameOf(el, role);
      if (name) line += ` "${name.replace(/"/g, "'")}"`;
      if (role === "heading") line += ` [level=${HEADINGS[el.tagName] || 2}]`;
      if (role === "checkbox" || role === "radio") line += el.checked ? " [checked]" : "";
      if (INTERACTIVE.has(role)) {
        const ref = `e${++next}`;
        el.setAttribute("data-tlref", ref);
        line += ` [ref=${ref}]`;
        if ((role === "textbox" || role === "searchbox" || role === "combobox") && el.value)
          line += `: ${clip(el.value)}`;
      }
      lines.push(line);
      if (LEAF.has(role)) return;
      childDepth = depth + 1;
    }
    for (const child of el.children) walk(child, childDepth);
  };
  walk(document.body, 0);
  return lines.join("\n");
}
