"""The element at a point of a Playwright page, as `ElementFacts`.

`element_at(page, x, y)` finds what a click at (x, y) CSS pixels would hit:
`document.elementFromPoint`, then into open shadow roots and same-origin
iframes inside the page; a cross-origin iframe is entered through
Playwright's frame objects, at the point translated into the child frame.
From the hit it climbs to the nearest actionable element and describes it
as assistive technology would (role, accessible name), with the form it
belongs to (its fields' names, types and autocomplete, never their values).
A text field's typed value is never read: it could be a password.

It never raises: a crashed or closed page, a navigation mid-call or a page
too busy to answer within `timeout` all give None. (Cancellation of the
caller still propagates.)
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from surfer.core.elements import ElementFacts

# One function, evaluated in a frame with [x, y] in that frame's CSS pixels.
# Returns the facts as a dict, {"frame": {...}} when the point lies in a
# cross-origin iframe (the caller goes on in that frame), or null.
ELEMENT_FACTS_JS = r"""([x, y]) => {
  const CAP = 160;
  const clean = (s, n) => (s || '').replace(/\s+/g, ' ').trim().slice(0, n || CAP);
  const lower = (s) => (s || '').toLowerCase().trim();
  const parentOf = (node) => node.parentElement || ((node.getRootNode && node.getRootNode().host) || null);

  // 1. the element at the point: into open shadow roots and same-origin frames
  let doc = document, px = x, py = y, hit = null, depth = 0;
  for (let guard = 0; guard < 16; guard++) {
    let found = doc.elementFromPoint(px, py);
    while (found && found.shadowRoot) {
      const inner = found.shadowRoot.elementFromPoint(px, py);
      if (!inner || inner === found) break;
      found = inner;
    }
    if (!found) break;
    hit = found;
    if (found.tagName !== 'IFRAME' && found.tagName !== 'FRAME') break;
    const rect = found.getBoundingClientRect(), style = getComputedStyle(found);
    // CSS `zoom` on the frame or around it draws its document larger: the point, in its CSS pixels, is smaller
    const zoom = found.offsetWidth ? rect.width / found.offsetWidth : 1;
    const lx = (px - rect.left) / zoom - found.clientLeft - parseFloat(style.paddingLeft || '0');
    const ly = (py - rect.top) / zoom - found.clientTop - parseFloat(style.paddingTop || '0');
    let child = null;
    try { child = found.contentDocument; } catch (e) { child = null; }
    if (!child || !child.documentElement) return {frame: {x: lx, y: ly, depth: depth}};
    doc = child; px = lx; py = ly; depth += 1; hit = null;
  }
  if (!hit) return null;

  // 2. the nearest actionable element
  const ACTIONABLE = 'a,button,input,select,textarea,summary,label,[onclick],[contenteditable=""],[contenteditable="true"],' +
    ['button', 'link', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'tab', 'option', 'checkbox', 'radio', 'switch',
     'combobox', 'searchbox', 'textbox', 'treeitem', 'slider', 'spinbutton'].map((r) => '[role="' + r + '"]').join(',');
  let el = null;
  for (let node = hit; node && node.nodeType === 1; node = parentOf(node)) {
    if (node === doc.body || node === doc.documentElement) break;
    if (node.matches(ACTIONABLE) && !(node.tagName === 'A' && !node.hasAttribute('href') && !node.hasAttribute('role') && !node.hasAttribute('onclick'))) {
      el = node; break;
    }
  }
  const plain = !el;
  if (!el) el = hit;
  if (el.tagName === 'LABEL' && el.control) el = el.control;

  const root = el.getRootNode ? el.getRootNode() : doc;
  const byId = (id) => (root.getElementById ? root.getElementById(id) : null) || doc.getElementById(id);
  const tag = el.tagName.toLowerCase();
  const typeAttr = lower(el.getAttribute('type'));
  const type = tag === 'input' ? (typeAttr || 'text') : tag === 'button' ? (['button', 'reset'].includes(typeAttr) ? typeAttr : 'submit') : '';
  const explicit = lower(el.getAttribute('role')).split(/\s+/)[0];
  const inputRoles = {checkbox: 'checkbox', radio: 'radio', button: 'button', submit: 'button', reset: 'button', image: 'button',
    range: 'slider', number: 'spinbutton', search: 'searchbox', file: 'button', color: 'button', hidden: ''};
  const implicit = () => {
    if (tag === 'a' || tag === 'area') return el.hasAttribute('href') ? 'link' : '';
    if (tag === 'button' || tag === 'summary') return 'button';
    if (tag === 'input') return type in inputRoles ? inputRoles[type] : (el.hasAttribute('list') ? 'combobox' : 'textbox');
    if (tag === 'select') return (el.multiple || el.size > 1) ? 'listbox' : 'combobox';
    if (tag === 'textarea') return 'textbox';
    if (tag === 'option') return 'option';
    if (/^h[1-6]$/.test(tag)) return 'heading';
    if (tag === 'img') return 'img';
    if (el.isContentEditable) return 'textbox';
    return '';
  };
  const role = explicit || implicit();
  const textEntry = (node) => {
    const t = node.tagName.toLowerCase(), r = lower(node.getAttribute('role'));
    if (t === 'textarea' || node.isContentEditable || ['textbox', 'searchbox', 'combobox'].includes(r)) return true;
    if (t !== 'input') return false;
    const ty = lower(node.getAttribute('type')) || 'text';
    return !['button', 'submit', 'reset', 'image', 'checkbox', 'radio', 'range', 'color', 'file', 'hidden'].includes(ty);
  };

  // 3. accessible name (never a text field's value)
  const contentText = (node) => {
    let text = clean(node.innerText || node.textContent || '');
    if (!text) {
      const inner = node.querySelector && node.querySelector('img[alt],[aria-label],svg title,[title]');
      if (inner) text = clean(inner.getAttribute('alt') || inner.getAttribute('aria-label') || inner.getAttribute('title') || inner.textContent);
    }
    return text;
  };
  const nameOf = (node) => {
    const t = node.tagName.toLowerCase(), ty = lower(node.getAttribute('type'));
    const field = textEntry(node);
    const labelledby = node.getAttribute('aria-labelledby');
    if (labelledby) {
      const r = node.getRootNode ? node.getRootNode() : doc;
      const text = labelledby.split(/\s+/).map((id) => {
        const ref = (r.getElementById ? r.getElementById(id) : null) || doc.getElementById(id);
        return ref ? (ref === node && field ? '' : (ref.innerText || ref.textContent || '')) : '';
      }).join(' ');
      if (clean(text)) return clean(text);
    }
    if (clean(node.getAttribute('aria-label'))) return clean(node.getAttribute('aria-label'));
    if (['input', 'select', 'textarea'].includes(t) && !['submit', 'button', 'reset', 'image'].includes(ty)) {
      const labels = node.labels ? Array.from(node.labels) : [];
      const text = labels.map((l) => {
        // a wrapping label's text without the controls inside it (a select's options, a textarea's text)
        const copy = l.cloneNode(true);
        copy.querySelectorAll('input,select,textarea,option').forEach((c) => c.remove());
        return copy.textContent;
      }).join(' ');
      if (clean(text)) return clean(text);
    }
    if (t === 'input' && ['submit', 'button', 'reset'].includes(ty)) return clean(node.value || node.getAttribute('value')) || (ty === 'submit' ? 'Submit' : ty === 'reset' ? 'Reset' : '');
    if (t === 'input' && ty === 'image') return clean(node.getAttribute('alt') || node.getAttribute('value')) || 'Submit';
    if (t === 'img' || t === 'area') return clean(node.getAttribute('alt'));
    if (field || t === 'select') {
      return clean(node.getAttribute('placeholder') || node.getAttribute('aria-placeholder') || node.getAttribute('title'));
    }
    return contentText(node) || clean(node.getAttribute('title'));
  };
  const name = nameOf(el);

  // 4. the form: fields by kind, never by value
  const PAYMENT = /card.?number|cardnumber|ccnum|cc.?num|cc.?number|credit.?card|debit.?card|\bcvc\b|\bcvv\b|\bcvc2\b|\bcvv2\b|\bcsc\b|card.?code|card.?verification|expir|exp.?date|exp.?month|exp.?year|\bmm\s*\/\s*yy\b/i;
  let form = null;
  const formEl = (el.form) || (el.closest ? el.closest('form') : null);
  if (formEl) {
    const controls = Array.from(formEl.elements || []).filter((c) => ['INPUT', 'SELECT', 'TEXTAREA'].includes(c.tagName));
    const fields = [];
    let payment = false, newPassword = false, currentPassword = false;
    for (const c of controls) {
      const ct = c.tagName.toLowerCase(), cty = ct === 'input' ? (lower(c.getAttribute('type')) || 'text') : ct;
      if (['submit', 'button', 'reset', 'image', 'hidden'].includes(cty)) continue;
      const auto = lower(c.getAttribute('autocomplete'));
      const f = {name: nameOf(c), type: cty, autocomplete: auto, input_name: clean(c.getAttribute('name'), 80), id: clean(c.id, 80)};
      if (fields.length < 40) fields.push(f);
      const tokens = auto.split(/\s+/);
      if (tokens.some((tk) => tk.startsWith('cc-')) || PAYMENT.test([f.name, f.input_name, f.id].join(' '))) payment = true;
      if (tokens.includes('new-password')) newPassword = true;
      else if (cty === 'password') currentPassword = true;
    }
    const submits = Array.from(formEl.elements || []).filter((c) =>
      (c.tagName === 'BUTTON' && !['button', 'reset'].includes(lower(c.getAttribute('type')))) ||
      (c.tagName === 'INPUT' && ['submit', 'image'].includes(lower(c.getAttribute('type')))));
    let formName = clean(formEl.getAttribute('aria-label'));
    if (!formName && formEl.getAttribute('aria-labelledby')) {
      formName = clean(formEl.getAttribute('aria-labelledby').split(/\s+/).map((id) => { const r = byId(id); return r ? r.textContent : ''; }).join(' '));
    }
    if (!formName) { const head = formEl.querySelector('legend,h1,h2,h3,h4'); if (head) formName = clean(head.textContent); }
    const originOf = (url) => { try { return new URL(url || doc.baseURI, doc.baseURI).origin; } catch (e) { return ''; } };
    const actionOrigin = originOf(formEl.getAttribute('action'));
    // where a submission may send the fields: the form's action, or a submit button's own formaction
    const sendsTo = [actionOrigin];
    for (const c of submits) if (c.hasAttribute('formaction') && sendsTo.length < 10) sendsTo.push(originOf(c.getAttribute('formaction')));
    form = {action_origin: actionOrigin, sends_to: [...new Set(sendsTo)], method: lower(formEl.getAttribute('method')) || 'get', fields: fields,
      submit_name: submits.length ? nameOf(submits[0]) : '', has_payment_fields: payment, has_new_password: newPassword,
      has_current_password: currentPassword, name: formName};
  }

  // 5. where it is: dialog, composite widget or landmark, list item or row
  let dialog = '', group = '', context = '';
  const GROUPS = ['tablist', 'menu', 'menubar', 'toolbar', 'listbox', 'radiogroup', 'tree', 'grid', 'treegrid', 'navigation', 'search', 'columnheader'];
  const tagGroups = {nav: 'navigation', search: 'search', th: 'columnheader'};
  for (let node = parentOf(el); node && node.nodeType === 1; node = parentOf(node)) {
    const r = lower(node.getAttribute('role')).split(/\s+/)[0];
    const t = node.tagName.toLowerCase();
    if (!dialog && (r === 'dialog' || r === 'alertdialog' || (t === 'dialog' && node.open))) {
      let title = '';
      if (node.getAttribute('aria-labelledby')) title = node.getAttribute('aria-labelledby').split(/\s+/).map((id) => { const e = byId(id); return e ? e.textContent : ''; }).join(' ');
      title = clean(title || node.getAttribute('aria-label') || ((node.querySelector('h1,h2,h3,h4') || {}).textContent), 120);
      const text = clean(node.innerText || node.textContent, 300);
      dialog = clean(title && !text.startsWith(title) ? title + ': ' + text : text, 300);
    }
    if (!group && (GROUPS.includes(r) || (!r && tagGroups[t]))) group = GROUPS.includes(r) ? r : tagGroups[t];
    if (!context && (['li', 'tr', 'article', 'fieldset'].includes(t) || ['row', 'listitem', 'article', 'group', 'region'].includes(r) ||
        (node.hasAttribute('aria-label') && !['body', 'html'].includes(t)))) {
      context = clean([node.getAttribute('aria-label') || '', node.innerText || ''].join(' '), 200);
    }
    if (node === doc.body) break;
  }

  // 6. a selector that finds it again in its frame
  let selector = '';
  if (el.id) selector = '#' + CSS.escape(el.id);
  else if (el.getAttribute('data-testid')) selector = '[data-testid="' + el.getAttribute('data-testid') + '"]';
  else if (el.getAttribute('name')) selector = tag + '[name="' + el.getAttribute('name') + '"]';
  else {
    const parts = [];
    for (let node = el; node && node.nodeType === 1 && node !== doc.body; node = node.parentElement) {
      const same = Array.from(node.parentElement ? node.parentElement.children : []).filter((c) => c.tagName === node.tagName);
      parts.unshift(node.tagName.toLowerCase() + (same.length > 1 ? ':nth-of-type(' + (same.indexOf(node) + 1) + ')' : ''));
      if (node.id) { parts[0] = '#' + CSS.escape(node.id); break; }
    }
    selector = parts.join(' > ');
  }
  const win = doc.defaultView || window;
  let origin = '';
  try { origin = (win.origin && win.origin !== 'null') ? win.origin : win.location.origin; } catch (e) { origin = ''; }
  const haspopup = lower(el.getAttribute('aria-haspopup'));
  return {
    role: role, name: name, tag: tag, type: type, autocomplete: lower(el.getAttribute('autocomplete')),
    href: clean(el.getAttribute('href'), 300), selector: selector, origin: origin, form: form,
    input_name: clean(el.getAttribute('name'), 80),
    method: lower(el.getAttribute('formmethod')) || (form ? form.method : ''),
    haspopup: haspopup === 'false' ? '' : haspopup, dialog: dialog, group: group, context: context, plain: plain,
  };
}"""

_MAX_FRAMES = 8  # cross-origin frames entered, at most, for one point

# Where the focused element of a frame is drawn (its centre, in the frame's CSS pixels, through open shadow roots);
# {"frame": true} when the focus is inside an iframe; null when nothing but the page itself has it.
FOCUSED_JS = r"""() => {
  let el = document.activeElement;
  while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
  if (!el || el === document.body || el === document.documentElement) return null;
  if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') return {frame: true};
  const r = el.getBoundingClientRect();
  if (!r.width || !r.height) return null;
  return {x: r.left + r.width / 2, y: r.top + r.height / 2};
}"""


async def element_at(page: Any, x: float, y: float, timeout: float = 2.0) -> Optional[ElementFacts]:
    """The element a click at (x, y) CSS pixels of `page` would act on, or None
    (nothing there, page closed or crashed, navigation, more than `timeout` s)."""
    try:
        return await asyncio.wait_for(_element_at(page, float(x), float(y)), timeout)
    except Exception:  # noqa: BLE001 - no answer is an answer: the rules fall back to the description
        return None


async def focused_element(page: Any, timeout: float = 2.0) -> Optional[ElementFacts]:
    """The element that has the keyboard focus in `page` (a key such as Enter acts on it), found where it is
    drawn, also inside iframes; None when only the page has the focus, or as `element_at` gives None."""
    try:
        return await asyncio.wait_for(_focused_element(page), timeout)
    except Exception:  # noqa: BLE001 - as element_at: no answer is an answer
        return None


async def _focused_element(page: Any) -> Optional[ElementFacts]:
    frame, left, top, zoom = page.main_frame, 0.0, 0.0, 1.0
    for _ in range(_MAX_FRAMES):
        data = await frame.evaluate(FOCUSED_JS)
        if not data:
            return None
        if not data.get("frame"):
            return await _element_at(page, left + float(data["x"]) * zoom, top + float(data["y"]) * zoom)
        for child in frame.child_frames:  # the one whose document has the focus
            if await child.evaluate("document.hasFocus()"):
                handle = await child.frame_element()
                try:
                    box = await handle.bounding_box()  # relative to the main frame's viewport
                    # (and the CSS zoom it is drawn at: its own CSS pixels are that much larger on the page)
                    inset = await handle.evaluate(
                        "e => [e.clientLeft, e.clientTop, e.offsetWidth ? e.getBoundingClientRect().width / e.offsetWidth : 1]")
                finally:
                    await handle.dispose()
                if not box:
                    return None
                zoom = inset[2] or 1.0
                frame, left, top = child, box["x"] + inset[0] * zoom, box["y"] + inset[1] * zoom
                break
        else:
            return None
    return None


async def _element_at(page: Any, x: float, y: float) -> Optional[ElementFacts]:
    frame = page.main_frame
    local_x, local_y = x, y
    for _ in range(_MAX_FRAMES):
        data = await frame.evaluate(ELEMENT_FACTS_JS, [local_x, local_y])
        if not data:
            return None
        hop = data.get("frame") if isinstance(data, dict) else None
        if not hop:
            return ElementFacts.from_dict(data)
        child = await _child_frame_at(frame, x, y, int(hop.get("depth", 0)) + 1)
        if child is None:
            return None
        frame, local_x, local_y = child, float(hop["x"]), float(hop["y"])
    return None


async def _child_frame_at(frame: Any, x: float, y: float, depth: int) -> Any:
    """The frame `depth` levels under `frame` whose element holds the page point
    (x, y): same-origin frames between were already crossed inside the page."""
    level = [frame]
    for _ in range(depth):
        level = [child for parent in level for child in parent.child_frames]
    best, best_area = None, float("inf")
    for child in level:
        handle = await child.frame_element()
        try:
            box = await handle.bounding_box()  # relative to the main frame's viewport
        finally:
            await handle.dispose()
        if box and box["x"] <= x <= box["x"] + box["width"] and box["y"] <= y <= box["y"] + box["height"]:
            area = box["width"] * box["height"]
            if area < best_area:
                best, best_area = child, area
    return best
