// In-page stand-ins for Chromium's out-of-DOM popups (surfer/tools/widgets.py).
//
// A <select> popup, a date/time picker or the colour chooser is a separate
// widget: Chromium draws it into screenshots, but mouse events sent through
// the DevTools protocol never reach it, so a click where an option is drawn
// does nothing. This script keeps those popups from opening and draws an
// equivalent one inside the page (an open shadow root on <surfer-popup>, a
// child of <html>, outside <body>), placed where Chromium puts its own. A
// click on a drawn option chooses it the way the native popup does: the
// element's value changes and `input` / `change` fire. The keyboard keeps
// working (arrows, typing to jump, Enter, Escape).
(() => {
  if (window.__surferWidgets) return;
  const api = (window.__surferWidgets = { open: null, contextMenu: null, printed: 0 });
  const BLUE = "#1967d2", BORDER = "#767676", ROW = 24, MAX_ROWS = 20, BAR = 15, TRACK = "#f1f1f1", THUMB = "#a8a8a8";
  const PICKERS = new Set(["date", "datetime-local", "month", "week", "time", "color"]);
  let host = null, root = null, state = null, typed = "", typedAt = 0;

  const fire = (el) => {
    el.dispatchEvent(new Event("input", { bubbles: true, composed: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
  };
  // (a customizable select, `appearance: base-select`, opens its own picker in the page, where clicks reach it)
  const isMenuList = (el) => el instanceof HTMLSelectElement && !el.multiple && el.size <= 1 && !el.disabled &&
    getComputedStyle(el).appearance !== "base-select";
  const pickerKind = (el) =>
    el instanceof HTMLInputElement && !el.disabled && !el.readOnly && PICKERS.has(el.type) ? el.type : null;
  const listOf = (el) =>
    el instanceof HTMLInputElement && !el.disabled && !el.readOnly && el.list && el.list.options.length ? el.list : null;

  const up = (node) => node.parentElement || (node.getRootNode().host || null); // through shadow roots
  // The top-layer element the field is in (an open modal <dialog>, an open popover), else null.
  function layerOf(el) {
    try {
      for (let node = el; node; node = up(node))
        if (node.matches("dialog:modal, :popover-open")) return node;
    } catch (e) { /* an older Chromium, without popovers: no such selector */ }
    return null;
  }

  const unshow = () => { try { host.hidePopover(); } catch (e) { /* not shown, or gone with its layer */ } };

  // The shadow root popups are drawn in, emptied. Under <html>; for a field in a top-layer element (a modal
  // <dialog>, a popover) inside that element and shown as a popover above it: drawn over it (the page under a
  // modal is drawn over it by the top layer, and inert), and part of it (a click there is not outside it, which
  // would close the page's popover).
  function mount(el) {
    if (!host || !host.isConnected) {
      host = document.createElement("surfer-popup");
      host.setAttribute("style", "all:initial;position:fixed;left:0;top:0;width:0;height:0;z-index:2147483647");
      root = host.attachShadow({ mode: "open" });
      for (const type of ["mousedown", "mouseup", "click", "pointerdown", "pointerup", "dblclick", "contextmenu"])
        root.addEventListener(type, (e) => {
          e.stopPropagation();
          if (type === "mousedown" || type === "pointerdown") e.preventDefault(); // keep focus on the element
        });
    }
    const layer = (el && layerOf(el)) || null;
    if (host.parentNode !== (layer || document.documentElement)) (layer || document.documentElement).appendChild(host);
    if (layer && host.showPopover) {
      host.popover = "manual";
      unshow();
      host.showPopover(); // (again: the last shown is the topmost)
    } else if (host.popover) host.removeAttribute("popover");
    // a page zoomed as a whole (`zoom` on <html>, or on the element it is in) would zoom the popup's position
    // again: undone, so the popup is placed in the same pixels getBoundingClientRect gives
    let zoom = 1;
    for (let node = host.parentNode; node && node.nodeType === 1; node = up(node))
      zoom *= parseFloat(getComputedStyle(node).zoom) || 1;
    host.style.zoom = String(1 / zoom);
    root.replaceChildren();
    return root;
  }

  function close() {
    if (!state) return;
    const was = state;
    state = null;
    api.open = null;
    if (root) root.replaceChildren();
    if (host && host.popover) unshow();
    if (was.onClose) was.onClose();
  }

  // The part of the window the agent sees (a screenshot clip, set by the environment), else the window.
  function area() {
    const a = api.area;
    return a ? { left: a.x, top: a.y, right: a.x + a.width, bottom: a.y + a.height }
      : { left: 0, top: 0, right: innerWidth, bottom: innerHeight };
  }

  // Where Chromium puts a popup: under the element, left-aligned, flipped above when there is more room
  // there; a popup that fits neither way is moved up until it fits (as at a screen edge).
  function place(box, el, height) {
    const r = el.getBoundingClientRect(), a = area();
    const below = a.bottom - r.bottom, above = r.top - a.top;
    let top;
    if (height <= below) top = r.bottom;
    else if (height <= above) top = r.top - height;
    else if (box.dataset.shrinks) top = below >= above ? r.bottom : a.top; // a list: the caller shrinks it to fit
    else top = Math.max(a.top, a.bottom - height);
    box.style.left = `${Math.max(a.left, Math.min(r.left, a.right - box.offsetWidth))}px`;
    box.style.top = `${top}px`;
    return Math.max(below, above);
  }

  // Pickers scale down to fit a small visible area (e.g. a 160 px benchmark crop).
  const compact = () => area().right - area().left < 250;

  function panel(el, extra) {
    // a select's popup uses the select's font; Chromium's pickers use the system UI font
    const style = el instanceof HTMLSelectElement ? getComputedStyle(el) : { fontSize: "13px", fontFamily: "system-ui, sans-serif" };
    const box = document.createElement("div");
    box.setAttribute("part", "popup");
    box.style.cssText =
      `position:fixed;box-sizing:border-box;border:1px solid ${BORDER};background:#fff;color:#000;` +
      `font:${style.fontSize} ${style.fontFamily};line-height:normal;text-align:left;` +
      `user-select:none;cursor:default;${extra || ""}`;
    return box;
  }

  // ---- list popups: <select> and <datalist> ----------------------------------------------------

  function listRows(el) {
    if (el instanceof HTMLSelectElement) {
      const rows = [];
      for (const child of el.children) {
        if (child instanceof HTMLOptGroupElement) {
          rows.push({ label: child.label, group: true });
          for (const option of child.children)
            if (option instanceof HTMLOptionElement)
              rows.push({ option, label: option.label || option.text, indent: true, disabled: child.disabled || option.disabled });
        } else if (child instanceof HTMLOptionElement) {
          rows.push({ option: child, label: child.label || child.text, disabled: child.disabled });
        }
      }
      return rows.filter((row) => !row.option || !row.option.hidden);
    }
    const needle = el.value.toLowerCase();
    return Array.from(listOf(el).options)
      .filter((o) => !o.disabled && o.value.toLowerCase().includes(needle) && o.value !== el.value)
      .map((option) => ({ option, label: option.value, hint: option.label && option.label !== option.value ? option.label : "" }));
  }

  function openList(el) {
    const rows = listRows(el);
    if (!rows.length) return close();
    close();
    const box = panel(el, "overflow-y:auto;overflow-x:hidden;padding:0;scrollbar-width:none");
    box.dataset.shrinks = "1";
    const r = el.getBoundingClientRect();
    const widest = area().right - area().left; // as wide as the window at most: long options are cut
    box.style.minWidth = `${Math.min(r.width, widest)}px`;
    box.style.maxWidth = `${widest}px`;
    const items = [];
    rows.forEach((row, i) => {
      const item = document.createElement("div");
      item.textContent = row.label;
      item.style.cssText =
        `height:${ROW}px;line-height:${ROW}px;padding:0 ${row.indent ? 20 : 4}px 0 ${row.indent ? 20 : 4}px;` +
        `white-space:pre;overflow:hidden;text-overflow:ellipsis;background:#efefef;` +
        (row.group ? "font-weight:bold;" : "") + (row.disabled ? "color:#6d6d6d;" : "");
      if (row.option) {
        const colour = getComputedStyle(row.option);
        if (colour.backgroundColor !== "rgba(0, 0, 0, 0)") item.style.background = colour.backgroundColor;
        item.dataset.option = String(i);
        item.dataset.label = row.label;
      }
      if (row.hint) {
        const hint = document.createElement("span");
        hint.textContent = `  ${row.hint}`;
        hint.style.color = "#6d6d6d";
        item.appendChild(hint);
      }
      items.push(item);
      box.appendChild(item);
    });
    mount(el).appendChild(box);
    const room = place(box, el, Math.min(rows.length, MAX_ROWS) * ROW + 2);
    const fit = Math.max(1, Math.min(rows.length, MAX_ROWS, Math.floor((room - 2) / ROW)));
    box.style.height = `${fit * ROW + 2}px`;
    if (fit < rows.length) box.style.paddingRight = `${BAR}px`; // room for the scroll bar drawn beside the rows
    place(box, el, fit * ROW + 2);
    if (fit < rows.length) scrollBar(box);
    const selectable = (i) => rows[i] && rows[i].option && !rows[i].disabled;
    const current = el instanceof HTMLSelectElement ? rows.findIndex((row) => row.option && row.option.selected) : -1;
    state = {
      kind: el instanceof HTMLSelectElement ? "select" : "datalist", el, rows, items, box,
      highlight: -1,
      move(delta) {
        let i = this.highlight;
        for (let n = 0; n < rows.length; n++) {
          i = Math.max(0, Math.min(rows.length - 1, i + delta));
          if (selectable(i)) return this.mark(i);
        }
      },
      mark(i) {
        if (!selectable(i)) return;
        if (this.highlight >= 0) paint(this.highlight, false);
        this.highlight = i;
        paint(i, true);
        const item = items[i];
        if (item.offsetTop < box.scrollTop) box.scrollTop = item.offsetTop;
        else if (item.offsetTop + ROW > box.scrollTop + box.clientHeight) box.scrollTop = item.offsetTop + ROW - box.clientHeight;
      },
      commit(i) {
        if (!selectable(i)) return;
        const option = rows[i].option;
        close();
        if (el instanceof HTMLSelectElement) {
          if (!option.selected) {
            option.selected = true;
            fire(el);
          }
        } else if (el.value !== option.value) {
          el.value = option.value;
          fire(el);
        }
      },
    };
    function paint(i, on) {
      const row = rows[i], item = items[i];
      const own = row.option ? getComputedStyle(row.option).backgroundColor : "rgba(0, 0, 0, 0)";
      item.style.background = on ? BLUE : own !== "rgba(0, 0, 0, 0)" ? own : "#efefef";
      item.style.color = on ? "#fff" : row.disabled ? "#6d6d6d" : "#000";
    }
    if (current >= 0) state.mark(current);
    box.addEventListener("mouseover", (e) => {
      const item = e.target.closest && e.target.closest("[data-option]");
      if (item && state) state.mark(Number(item.dataset.option));
    });
    box.addEventListener("click", (e) => {
      const item = e.target.closest && e.target.closest("[data-option]");
      if (item && state) state.commit(Number(item.dataset.option));
    });
    api.open = state.kind;
  }

  // A list longer than its popup shows a scroll bar, as Chromium's does. Drawn here, not left to the browser:
  // the headless shell hides every scroll bar (Playwright's --hide-scrollbars), and a model that sees no bar
  // cannot tell the list goes on. Its track pages the list when clicked; its thumb can be dragged.
  function scrollBar(box) {
    const track = document.createElement("div"), thumb = document.createElement("div");
    track.setAttribute("part", "scrollbar");
    track.style.cssText = `position:fixed;width:${BAR}px;background:${TRACK};cursor:default`;
    thumb.style.cssText = `position:absolute;left:3px;right:3px;border-radius:4px;background:${THUMB}`;
    track.appendChild(thumb);
    box.after(track);
    const draw = () => {
      const r = box.getBoundingClientRect(), view = box.clientHeight, all = box.scrollHeight;
      track.style.left = `${r.right - 1 - BAR}px`;
      track.style.top = `${r.top + 1}px`;
      track.style.height = `${view}px`;
      const length = Math.max(16, (view * view) / all);
      thumb.style.height = `${length}px`;
      thumb.style.top = `${(box.scrollTop / Math.max(1, all - view)) * (view - length)}px`;
    };
    draw();
    box.addEventListener("scroll", draw);
    track.addEventListener("wheel", (e) => { e.preventDefault(); box.scrollTop += e.deltaY; }, { passive: false });
    track.addEventListener("pointerdown", (e) => {
      const at = thumb.getBoundingClientRect();
      if (e.target !== thumb) { // a click on the track: a page toward it
        box.scrollTop += (e.clientY < at.top ? -1 : 1) * box.clientHeight;
        return;
      }
      const from = e.clientY, start = box.scrollTop;
      const ratio = (box.scrollHeight - box.clientHeight) / Math.max(1, box.clientHeight - at.height);
      thumb.setPointerCapture(e.pointerId);
      const move = (m) => { box.scrollTop = start + (m.clientY - from) * ratio; };
      thumb.addEventListener("pointermove", move);
      thumb.addEventListener("pointerup", () => thumb.removeEventListener("pointermove", move), { once: true });
    });
  }

  function listKey(e) {
    const s = state;
    const key = e.key;
    if (key === "ArrowDown" || key === "ArrowUp") s.move(key === "ArrowDown" ? 1 : -1);
    else if (key === "PageDown" || key === "PageUp") s.move(key === "PageDown" ? 10 : -10);
    else if (key === "Home" || key === "End") {
      s.highlight = key === "Home" ? -1 : s.rows.length;
      s.move(key === "Home" ? 1 : -1);
    } else if (key === "Enter" || (key === " " && s.kind === "select" && !typed)) {
      if (s.highlight >= 0) s.commit(s.highlight);
      else close();
    } else if (key === "Escape") close();
    else if (key === "Tab") {
      if (s.kind === "select" && s.highlight >= 0) s.commit(s.highlight);
      else close();
      return; // let focus move on
    } else if (s.kind === "select" && key.length === 1 && !e.ctrlKey && !e.metaKey && !e.altKey) {
      const now = Date.now();
      typed = now - typedAt > 1000 ? key : typed + key;
      typedAt = now;
      const needle = typed.toLowerCase();
      const found = s.rows.findIndex((row, i) => row.option && !row.disabled && row.label.toLowerCase().startsWith(needle));
      if (found >= 0) s.mark(found);
    } else return;
    e.preventDefault();
    e.stopImmediatePropagation();
  }

  // ---- pickers: date, month, week, time, colour -----------------------------------------------

  const pad = (n, w = 2) => String(n).padStart(w, "0");
  const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December"];
  const ymd = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  function isoWeek(d) {
    const t = new Date(Date.UTC(d.getFullYear(), d.getMonth(), d.getDate()));
    const day = t.getUTCDay() || 7;
    t.setUTCDate(t.getUTCDate() + 4 - day);
    const first = new Date(Date.UTC(t.getUTCFullYear(), 0, 1));
    return `${t.getUTCFullYear()}-W${pad(Math.ceil(((t - first) / 86400000 + 1) / 7))}`;
  }
  function shownDate(el) {
    const v = el.value;
    let m;
    if ((m = /^(\d{4,})-(\d\d)-(\d\d)/.exec(v))) return new Date(+m[1], +m[2] - 1, +m[3]);
    if ((m = /^(\d{4,})-(\d\d)$/.exec(v))) return new Date(+m[1], +m[2] - 1, 1);
    if ((m = /^(\d{4,})-W(\d\d)$/.exec(v))) {
      const jan4 = new Date(+m[1], 0, 4);
      return new Date(+m[1], 0, 4 - ((jan4.getDay() || 7) - 1) + (+m[2] - 1) * 7);
    }
    return new Date();
  }
  function setValue(el, value) {
    close();
    if (el.value === value) return;
    el.value = value;
    fire(el);
  }
  function button(text, data, css) {
    const b = document.createElement("div");
    b.textContent = text;
    b.dataset.pick = data;
    b.dataset.label = text;
    b.style.cssText = `display:inline-block;text-align:center;cursor:default;${css || ""}`;
    return b;
  }

  // Calendars: days (date, week), months (month; or a date's title clicked) and years (a months title clicked),
  // so a far-away date takes a few clicks, as in Chromium's month-year selector.
  function openCalendar(el, kind, month, view) {
    view = view || (kind === "month" ? "months" : "days");
    close();
    const small = compact();
    const z = small ? { width: Math.max(120, area().right - area().left - 2), pad: "3px 3px", head: 20, cell: 15, big: 24, font: "9px" }
      : { width: 232, pad: "8px 10px", head: 30, cell: 28, big: 36, font: "13px" };
    const box = panel(el, `width:${z.width}px;padding:${z.pad};font-size:${z.font};border-color:#cecece;border-radius:4px;box-shadow:0 2px 6px rgba(0,0,0,.25)`);
    const chosen = el.value ? shownDate(el) : null;
    const today = new Date();
    const year = month.getFullYear(), firstYear = year - (((year % 12) + 12) % 12);
    const head = document.createElement("div");
    head.style.cssText = `display:flex;align-items:center;justify-content:space-between;height:${z.head}px;font-weight:bold`;
    const label = view === "days" ? `${MONTHS[month.getMonth()]} ${year}` : view === "months" ? String(year) : `${firstYear}–${firstYear + 11}`;
    const title = button(`${label}${view === "years" ? "" : " ▾"}`, view === "years" ? "" : `view:${view === "days" ? "months" : "years"}`, "font-weight:bold");
    const nav = document.createElement("span");
    const arrow = `width:${z.head}px;font-size:${small ? 12 : 18}px;font-weight:normal`;
    nav.append(button("↑", "prev", arrow), button("↓", "next", arrow));
    head.append(title, nav);
    box.appendChild(head);
    const grid = document.createElement("div");
    box.appendChild(grid);
    const cell = (text, pick, on) =>
      grid.appendChild(button(text, pick, `line-height:${z.big}px;border-radius:3px;${on ? `background:${BLUE};color:#fff` : ""}`));
    if (view === "months") {
      grid.style.cssText = `display:grid;grid-template-columns:repeat(4,1fr);gap:${small ? 2 : 6}px;margin:${small ? 2 : 8}px 0`;
      MONTHS.forEach((name, i) => {
        const on = chosen && chosen.getFullYear() === year && chosen.getMonth() === i;
        cell(name.slice(0, 3), kind === "month" ? `${year}-${pad(i + 1)}` : `month:${year}-${i}`, on);
      });
    } else if (view === "years") {
      grid.style.cssText = `display:grid;grid-template-columns:repeat(4,1fr);gap:${small ? 2 : 6}px;margin:${small ? 2 : 8}px 0`;
      for (let y = firstYear; y < firstYear + 12; y++) cell(String(y), `year:${y}`, chosen && chosen.getFullYear() === y);
    } else {
      const cols = kind === "week" ? 8 : 7;
      grid.style.cssText = `display:grid;grid-template-columns:repeat(${cols},1fr);row-gap:${small ? 0 : 2}px;margin-top:${small ? 0 : 6}px`;
      for (const d of [...(kind === "week" ? ["Wk"] : []), "S", "M", "T", "W", "T", "F", "S"])
        grid.appendChild(button(d, "", `line-height:${z.cell}px;font-weight:bold`));
      const start = new Date(year, month.getMonth(), 1);
      start.setDate(1 - start.getDay());
      for (let w = 0; w < 6; w++) {
        const sunday = new Date(start.getFullYear(), start.getMonth(), start.getDate() + w * 7);
        const week = isoWeek(new Date(sunday.getFullYear(), sunday.getMonth(), sunday.getDate() + 1));
        if (kind === "week") grid.appendChild(button(week.slice(-2), week, `line-height:${z.cell}px;color:#6d6d6d`));
        for (let i = 0; i < 7; i++) {
          const d = new Date(sunday.getFullYear(), sunday.getMonth(), sunday.getDate() + i);
          const value = kind === "week" ? isoWeek(d) : ymd(d);
          const on = kind === "week" ? el.value === value : chosen && ymd(chosen) === value;
          const other = d.getMonth() !== month.getMonth();
          grid.appendChild(button(String(d.getDate()), value,
            `line-height:${z.cell}px;border-radius:2px;${other ? "color:#6d6d6d;" : ""}` +
            (on ? `background:${BLUE};color:#fff;` : ymd(d) === ymd(today) ? "outline:2px solid #000;outline-offset:-2px;" : "")));
        }
      }
    }
    const foot = document.createElement("div");
    foot.style.cssText = `display:flex;justify-content:space-between;margin-top:${small ? 2 : 6}px;color:#0061d5`;
    const now = kind === "month" ? `${today.getFullYear()}-${pad(today.getMonth() + 1)}` : kind === "week" ? isoWeek(today) : ymd(today);
    const link = small ? "padding:1px 3px" : "padding:4px 6px";
    foot.append(button("Clear", "clear", link), button(kind === "month" ? "This month" : kind === "week" ? "This week" : "Today", now, link));
    box.appendChild(foot);
    mount(el).appendChild(box);
    place(box, el, box.offsetHeight);
    box.addEventListener("click", (e) => {
      const pick = e.target.closest && e.target.closest("[data-pick]");
      if (!pick || !pick.dataset.pick) return;
      const v = pick.dataset.pick;
      if (v === "prev" || v === "next") {
        const step = v === "prev" ? -1 : 1;
        const next = view === "years" ? new Date(year + 12 * step, 0, 1) : view === "months" ? new Date(year + step, 0, 1)
          : new Date(year, month.getMonth() + step, 1);
        return openCalendar(el, kind, next, view);
      }
      if (v.startsWith("view:")) return openCalendar(el, kind, month, v.slice(5));
      if (v.startsWith("year:")) return openCalendar(el, kind, new Date(+v.slice(5), month.getMonth(), 1), "months");
      if (v.startsWith("month:")) {
        const [y, m] = v.slice(6).split("-").map(Number);
        return openCalendar(el, kind, new Date(y, m, 1), "days");
      }
      // datetime-local: the calendar sets the date and keeps the time typed (midnight when none)
      const time = kind === "datetime-local" && v !== "clear" ? `T${(el.value.split("T")[1] || "00:00")}` : "";
      setValue(el, v === "clear" ? "" : v + time);
    });
    state = { kind, el, box };
    api.open = kind;
  }

  function openTime(el) {
    close();
    const box = panel(el, "display:flex;height:224px;padding:4px;gap:4px;border-color:#cecece;border-radius:4px;box-shadow:0 2px 6px rgba(0,0,0,.25)");
    const m = /^(\d\d):(\d\d)/.exec(el.value);
    const parts = { h: m ? +m[1] : null, min: m ? +m[2] : null };
    const column = (values, key, current) => {
      const col = document.createElement("div");
      col.style.cssText = "overflow-y:auto;width:52px;scrollbar-width:none";
      for (const [label, v] of values) {
        const on = current === v;
        col.appendChild(button(label, `${key}:${v}`, `display:block;line-height:28px;border-radius:2px;${on ? `background:${BLUE};color:#fff` : ""}`));
      }
      return col;
    };
    const h12 = parts.h === null ? null : parts.h % 12 || 12;
    const pm = parts.h === null ? null : parts.h >= 12;
    box.append(
      column(Array.from({ length: 12 }, (_, i) => [pad(i + 1), i + 1]), "h", h12),
      column(Array.from({ length: 60 }, (_, i) => [pad(i), i]), "m", parts.min),
      column([["AM", 0], ["PM", 1]], "p", pm === null ? null : Number(pm)),
    );
    mount(el).appendChild(box);
    place(box, el, 224);
    for (const col of box.children) {
      const on = Array.from(col.children).find((b) => b.style.background);
      if (on) col.scrollTop = on.offsetTop - 4;
    }
    box.addEventListener("click", (e) => {
      const pick = e.target.closest && e.target.closest("[data-pick]");
      if (!pick) return;
      const [key, raw] = pick.dataset.pick.split(":");
      const v = Number(raw);
      const now = /^(\d\d):(\d\d)/.exec(el.value);
      let h = now ? +now[1] : 0, min = now ? +now[2] : 0;
      if (key === "h") h = (v % 12) + (h >= 12 ? 12 : 0);
      if (key === "m") min = v;
      if (key === "p") h = (h % 12) + (v ? 12 : 0);
      el.value = `${pad(h)}:${pad(min)}`;
      fire(el);
      const keep = Array.from(box.children).map((c) => c.scrollTop);
      openTime(el);
      Array.from(state.box.children).forEach((c, i) => (c.scrollTop = keep[i]));
    });
    state = { kind: "time", el, box };
    api.open = "time";
  }

  const SWATCHES = [
    "#000000", "#444444", "#666666", "#999999", "#cccccc", "#eeeeee", "#f3f3f3", "#ffffff",
    "#ff0000", "#ff9900", "#ffff00", "#00ff00", "#00ffff", "#0000ff", "#9900ff", "#ff00ff",
    "#f4cccc", "#fce5cd", "#fff2cc", "#d9ead3", "#d0e0e3", "#cfe2f3", "#d9d2e9", "#ead1dc",
    "#e06666", "#f6b26b", "#ffd966", "#93c47d", "#76a5af", "#6fa8dc", "#8e7cc3", "#c27ba0",
    "#990000", "#b45f06", "#bf9000", "#38761d", "#134f5c", "#0b5394", "#351c75", "#741b47",
  ];

  function openColour(el) {
    close();
    const box = panel(el, "width:216px;padding:8px;border-color:#cecece;border-radius:4px;box-shadow:0 2px 6px rgba(0,0,0,.25)");
    const grid = document.createElement("div");
    grid.style.cssText = "display:grid;grid-template-columns:repeat(8,1fr);gap:4px";
    for (const c of SWATCHES)
      grid.appendChild(button("", c, `height:20px;background:${c};border:1px solid ${c === el.value ? "#000" : "#cecece"};box-sizing:border-box`));
    const row = document.createElement("div");
    row.style.cssText = "display:flex;align-items:center;gap:6px;margin-top:8px";
    const hex = document.createElement("input");
    hex.value = el.value;
    hex.setAttribute("aria-label", "Hex colour");
    hex.style.cssText = "width:90px;font:inherit;padding:2px 4px;border:1px solid #767676";
    const sample = document.createElement("div");
    sample.style.cssText = `width:24px;height:24px;border:1px solid #767676;background:${el.value}`;
    row.append(sample, document.createTextNode("HEX"), hex);
    box.append(grid, row);
    mount(el).appendChild(box);
    place(box, el, box.offsetHeight);
    box.addEventListener("click", (e) => {
      const pick = e.target.closest && e.target.closest("[data-pick]");
      if (pick) setValue(el, pick.dataset.pick);
    });
    box.addEventListener("mousedown", (e) => { if (e.target === hex) setTimeout(() => hex.focus()); });
    hex.addEventListener("keydown", (e) => {
      e.stopPropagation();
      if (e.key === "Enter" && /^#?[0-9a-f]{6}$/i.test(hex.value.trim())) setValue(el, `#${hex.value.trim().replace("#", "").toLowerCase()}`);
      if (e.key === "Escape") { close(); el.focus(); }
    });
    state = { kind: "color", el, box, hex };
    api.open = "color";
  }

  function openPicker(el) {
    const kind = pickerKind(el);
    if (kind === "color") openColour(el);
    else if (kind === "time") openTime(el);
    else if (kind) openCalendar(el, kind, (() => { const d = shownDate(el); return new Date(d.getFullYear(), d.getMonth(), 1); })());
  }

  // The calendar / clock indicator sits at the right end of the field (Chromium draws it there).
  const onIndicator = (el, e) => el.type === "color" || e.clientX >= el.getBoundingClientRect().right - 24;

  // ---- event wiring --------------------------------------------------------------------------

  const inPopup = (e) => host && e.composedPath().includes(host);
  // The element an event is really for: a control inside a page's (open) shadow root, not its host.
  const targetOf = (e) => e.composedPath()[0] || e.target;
  const deepActive = () => {
    let el = document.activeElement;
    while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    return el;
  };

  addEventListener("mousedown", (e) => {
    if (inPopup(e) || e.button !== 0) return;
    const el = targetOf(e);
    const kind = isMenuList(el) ? "select" : pickerKind(el);
    if (state && state.el === el && (kind === "select" || kind === state.kind)) {
      e.preventDefault();
      close();
      return;
    }
    if (state && (!state.hex || el !== state.hex)) close();
    if (kind === "select") {
      e.preventDefault(); // no native popup: it could not be clicked
      el.focus({ focusVisible: false });
      openList(el);
    } else if (kind && onIndicator(el, e)) {
      e.preventDefault();
      el.focus({ focusVisible: false });
      openPicker(el);
    }
  }, true);

  addEventListener("click", (e) => {
    if (inPopup(e)) return;
    const el = targetOf(e);
    // the click that ends a press on an indicator would open the native picker too
    if (pickerKind(el) && state && state.el === el) {
      e.preventDefault();
    } else if (listOf(el) && !state && e.button === 0) {
      openList(el);
    }
  }, true);

  addEventListener("input", (e) => {
    const el = targetOf(e);
    if (listOf(el) && !inPopup(e) && (!state || state.el === el)) openList(el);
  }, true);

  addEventListener("keydown", (e) => {
    const el = targetOf(e);
    if (state && (state.kind === "select" || state.kind === "datalist") && el === state.el) return listKey(e);
    if (state && e.key === "Escape") { close(); e.preventDefault(); return; }
    if (isMenuList(el) && !state && (e.key === "Enter" || e.key === " " || e.key === "F4" || (e.altKey && e.key.startsWith("Arrow")))) {
      e.preventDefault();
      e.stopImmediatePropagation();
      openList(el);
    } else if (listOf(el) && !state && e.key === "ArrowDown") {
      e.preventDefault();
      openList(el);
    } else if (pickerKind(el) && !state && (e.altKey && e.key === "ArrowDown")) {
      e.preventDefault();
      openPicker(el);
    }
  }, true);

  addEventListener("focusout", (e) => {
    if (!state || targetOf(e) !== state.el) return;
    setTimeout(() => { if (state && deepActive() !== state.el && !(state.hex && root.activeElement === state.hex)) close(); });
  }, true);
  addEventListener("scroll", (e) => { if (state && !inPopup(e)) close(); }, true);
  addEventListener("resize", () => close());
  addEventListener("wheel", (e) => { if (state && !inPopup(e)) close(); }, { capture: true, passive: true });

  // A page's showPicker() would open the native picker; open the drawn one instead.
  const showPicker = HTMLInputElement.prototype.showPicker;
  if (showPicker)
    HTMLInputElement.prototype.showPicker = function () {
      if (pickerKind(this)) return openPicker(this);
      return showPicker.call(this);
    };
  const selectPicker = HTMLSelectElement.prototype.showPicker;
  if (selectPicker)
    HTMLSelectElement.prototype.showPicker = function () {
      if (isMenuList(this)) return openList(this);
      return selectPicker.call(this);
    };

  // window.print(): the headless shell ignores it; a browser with a window opens its print preview, which
  // holds the page (and the action that clicked Print) until a person closes it. Neither prints: the call
  // is noted, and the click's outcome says so (widgets.py).
  window.print = function print() { api.printed = Date.now(); };

  // Right clicks: did the page offer its own menu (it cancels the event), or would Chromium's appear?
  // (the event is kept: after dispatch, defaultPrevented says whether any handler cancelled it)
  addEventListener("contextmenu", (e) => { api.contextMenu = { event: e, at: Date.now() }; }, true);
  api.contextMenuState = () =>
    api.contextMenu && { prevented: api.contextMenu.event.defaultPrevented, at: api.contextMenu.at };

  // What is drawn, for tests and ground-truth oracles: each clickable item with its text and box.
  api.drawn = () => {
    if (!state || !root) return [];
    const view = state.box.getBoundingClientRect();
    return Array.from(root.querySelectorAll("[data-label], [data-option]")).map((item) => {
      const r = item.getBoundingClientRect();
      const clip = item.parentElement.getBoundingClientRect();
      const top = Math.max(r.top, view.top, clip.top), bottom = Math.min(r.bottom, view.bottom, clip.bottom);
      return { label: item.dataset.label || "", value: item.dataset.pick || "", x: r.left, y: r.top,
        width: r.width, height: r.height, visible: bottom - top >= r.height / 2 };
    });
  };
})();
