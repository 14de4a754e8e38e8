"""A small real Tk application for the desktop tests.

A form: two number fields, a 'Multiply' checkbox, a 'Compute' button and a
result label, plus a few areas that report input (double and right clicks,
hover, drag and drop, key combinations, scrolling), two buttons that open
real dialog windows (a Yes/No question, a file chooser) and an account toolbar
('Orders', 'Delete account'). Every event is printed
to stdout as one JSON line; once the window is mapped the app prints
{"event": "ready", "screen": [w, h], "widgets": {name: {x, y, width, height}}}
with each widget's box in screen pixels, so a test knows where things are.

Its entries keep Tk's own keys: on X11 Control+A goes to the line's start
(Emacs' binding) and Control+/ selects all.

    DISPLAY=:99 python tests/apps/tk_form.py
"""

from __future__ import annotations

import json
import sys
import tkinter as tk


def emit(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")


class FormApp:
    def __init__(self, root: tk.Tk) -> None:
        self.root = root
        root.title("Surfer test form")
        root.geometry("+40+30")
        root.bind_all("<Control-s>", lambda e: emit("key", keys="Control+S"))
        root.bind_all("<Control-Shift-Z>", lambda e: emit("key", keys="Control+Shift+Z"))
        root.bind_all("<Escape>", lambda e: emit("key", keys="Escape"))

        self.widgets: dict[str, tk.Widget] = {}
        tk.Label(root, text="First number").grid(row=0, column=0, sticky="w", padx=8, pady=6)
        self.first = self._entry("first", row=0)
        tk.Label(root, text="Second number").grid(row=1, column=0, sticky="w", padx=8, pady=6)
        self.second = self._entry("second", row=1)
        self.multiply = tk.BooleanVar(value=False)
        box = tk.Checkbutton(root, text="Multiply", variable=self.multiply,
                             command=lambda: emit("checkbox", multiply=self.multiply.get()))
        box.grid(row=2, column=1, sticky="w", pady=6)
        self.widgets["multiply"] = box
        button = tk.Button(root, text="Compute", command=self.compute, width=12)
        button.grid(row=3, column=1, sticky="w", pady=6)
        self.widgets["compute"] = button
        self.result = tk.Label(root, text="Result: -", width=24, anchor="w", relief="groove")
        self.result.grid(row=4, column=0, columnspan=2, sticky="we", padx=8, pady=6)
        self.result.bind("<Double-Button-1>", lambda e: emit("double-click", widget="result"))
        self.widgets["result"] = self.result

        pad = tk.Label(root, text="Click pad", width=24, height=2, relief="ridge", bg="#dde")
        pad.grid(row=5, column=0, columnspan=2, sticky="we", padx=8, pady=6)
        for number_, name in ((1, "left"), (2, "middle"), (3, "right")):
            pad.bind(f"<Button-{number_}>", lambda e, name=name: emit("click", widget="pad", button=name))
        self.widgets["pad"] = pad
        hover = tk.Label(root, text="Hover here", width=24, height=2, relief="ridge", bg="#ede")
        hover.grid(row=6, column=0, columnspan=2, sticky="we", padx=8, pady=6)
        hover.bind("<Enter>", lambda e: emit("hover", widget="hover"))
        self.widgets["hover"] = hover

        self.canvas = tk.Canvas(root, width=300, height=90, bg="white", highlightthickness=0)
        self.canvas.grid(row=7, column=0, columnspan=2, padx=8, pady=6)
        self.token = self.canvas.create_rectangle(10, 30, 40, 60, fill="orange")
        self.canvas.create_rectangle(230, 20, 290, 70, outline="green", width=3)
        self.canvas.tag_bind(self.token, "<ButtonPress-1>", self._grab)
        self.canvas.bind("<B1-Motion>", self._move)
        self.canvas.bind("<ButtonRelease-1>", self._drop)
        self._dragging: tuple[int, int] | None = None
        self.widgets["canvas"] = self.canvas

        self.listbox = tk.Listbox(root, height=5, width=30)
        for i in range(100):
            self.listbox.insert("end", f"Item {i}")
        self.listbox.configure(yscrollcommand=self._scrolled)
        self.listbox.grid(row=8, column=0, columnspan=2, padx=8, pady=6)
        self.widgets["list"] = self.listbox

        # Real dialog windows: a Yes/No question and a file chooser (each reports its buttons' boxes once shown).
        dialogs = tk.Frame(root)
        dialogs.grid(row=9, column=0, columnspan=2, pady=6)
        ask = tk.Button(dialogs, text="Ask", command=self.ask)
        ask.pack(side="left", padx=6)
        self.widgets["ask"] = ask
        open_file = tk.Button(dialogs, text="Open file…", command=self.open_file)
        open_file.pack(side="left", padx=6)
        self.widgets["open_file"] = open_file
        # An account toolbar: a navigation button and one that commits.
        for name, text, event in (("orders", "Orders", "orders"), ("delete_account", "Delete account", "account-deleted")):
            button = tk.Button(dialogs, text=text, command=lambda event=event: emit(event))
            button.pack(side="left", padx=6)
            self.widgets[name] = button
        # Busy: a spinner on the canvas that turns from then on, forever (what a settle wait must not wait out).
        busy = tk.Button(dialogs, text="Busy", command=self.busy)
        busy.pack(side="left", padx=6)
        self.widgets["busy"] = busy

    def busy(self) -> None:
        spinner = self.canvas.create_arc(135, 30, 165, 60, start=0, extent=90, style="arc", width=4, outline="#333")

        def turn(angle: int = 0) -> None:
            self.canvas.itemconfigure(spinner, start=angle)
            self.root.after(40, turn, (angle + 30) % 360)
        turn()
        emit("busy")

    def _entry(self, name: str, row: int) -> tk.Entry:
        entry = tk.Entry(self.root, width=20)
        entry.grid(row=row, column=1, padx=8, pady=6)
        entry.bind("<Return>", lambda e: emit("submit", field=name, value=entry.get()))
        entry.bind("<KeyRelease>", lambda e: emit("text", field=name, value=entry.get()))
        self.widgets[name] = entry
        return entry

    def compute(self) -> None:
        a, b = number(self.first.get()), number(self.second.get())
        value = a * b if self.multiply.get() else a + b
        text = f"{value:g}"
        self.result.configure(text=f"Result: {text}")
        emit("computed", first=self.first.get(), second=self.second.get(), multiply=self.multiply.get(), result=text)

    def ask(self) -> None:
        from tkinter import messagebox

        self.root.after(300, self._report_dialog, ".__tk__messagebox", ("yes", "no"))
        emit("answer", yes=messagebox.askyesno("Confirm", "Delete the file?", parent=self.root))

    def open_file(self) -> None:
        from tkinter import filedialog

        emit("chosen", path=filedialog.askopenfilename(parent=self.root, title="Choose a file"))

    def _report_dialog(self, window: str, buttons: tuple[str, ...]) -> None:
        call = self.root.tk.call
        boxes = {
            name: {key: int(call("winfo", key, f"{window}.{name}")) for key in ("rootx", "rooty", "width", "height")}
            for name in buttons
        }
        emit("dialog", window=window, buttons=boxes)

    def _grab(self, event: tk.Event) -> None:
        self._dragging = (event.x, event.y)

    def _move(self, event: tk.Event) -> None:
        if self._dragging is not None:
            self.canvas.move(self.token, event.x - self._dragging[0], event.y - self._dragging[1])
            self._dragging = (event.x, event.y)

    def _drop(self, event: tk.Event) -> None:
        if self._dragging is not None:
            self._dragging = None
            x1, y1, x2, y2 = self.canvas.coords(self.token)
            emit("drop", x=(x1 + x2) / 2, y=(y1 + y2) / 2, in_target=230 <= (x1 + x2) / 2 <= 290 and 20 <= (y1 + y2) / 2 <= 70)

    def _scrolled(self, first: str, last: str) -> None:
        emit("scroll", first=round(float(first), 3))

    def report(self) -> None:
        self.root.update_idletasks()
        boxes = {
            name: {"x": w.winfo_rootx(), "y": w.winfo_rooty(), "width": w.winfo_width(), "height": w.winfo_height()}
            for name, w in self.widgets.items()
        }
        boxes["canvas_target"] = {"x": self.canvas.winfo_rootx() + 230, "y": self.canvas.winfo_rooty() + 20, "width": 60, "height": 50}
        boxes["canvas_token"] = {"x": self.canvas.winfo_rootx() + 10, "y": self.canvas.winfo_rooty() + 30, "width": 30, "height": 30}
        emit("ready", screen=[self.root.winfo_screenwidth(), self.root.winfo_screenheight()], widgets=boxes)


def main() -> None:
    root = tk.Tk()
    app = FormApp(root)
    root.wait_visibility(root)
    root.focus_force()
    root.after(50, app.report)
    root.mainloop()


if __name__ == "__main__":
    sys.exit(main())
