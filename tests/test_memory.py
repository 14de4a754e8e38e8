"""Memory stays bounded: notes capped and deduplicated, history compacted."""

from surfer.agent.memory import Memory


def test_notes_are_capped_by_count_and_characters_and_deduplicated():
    memory = Memory("task", notes_chars=200, max_notes=3)
    for i in range(10):
        memory.add_note(f"note {i}")
        memory.add_note(f"note {i}")  # an immediate repeat is not stored twice
    rendered = memory.render_notes()
    assert rendered.splitlines() == ["(7 older note(s) dropped)", "- note 7", "- note 8", "- note 9"]
    memory.add_note("x" * 500)  # one long note is clipped, and evicts the rest to fit
    assert len(memory.render_notes()) < 450


def test_history_keeps_a_window_and_summarises_the_rest():
    memory = Memory("task", history_window=2)
    memory.add_history(1, "click(target='a')", "done")
    memory.add_history(2, "type(text='b')", "error: no field")
    memory.add_history(3, "click(target='c')", "done")
    memory.add_history(4, "scroll()", "done")
    lines = memory.render_history().splitlines()
    assert lines[0] == "Steps 1-2: 1 click, 1 type; 1 error(s)."
    assert lines[1:] == ["Step 3: click(target='c') -> done", "Step 4: scroll() -> done"]


def test_empty_memory_renders_placeholders():
    memory = Memory("task")
    assert memory.render_notes() == "(none)"
    assert memory.render_history() == "(no actions yet)"
