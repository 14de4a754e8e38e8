"""Suite files: variables, secrets, and errors that name file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from inprocess import surfer

from surfer.qa.suite import SuiteError, TextExpectation, UrlExpectation, load_suite

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "qa" / "library.yaml"


def test_sample_suite_loads_with_variables_and_keeps_secret_placeholders():
    suite = load_suite(SAMPLE, {"demo_url": "http://127.0.0.1:9/"}, {"LIBRARY_PASSWORD": "s3cret-value"})
    sign_in, register, hours = suite.cases
    assert sign_in.goals == ["Sign in as alice with the password {{secret:LIBRARY_PASSWORD}}"]
    assert suite.resolve_url(sign_in.url) == "http://127.0.0.1:9/login.html"
    assert sign_in.expect[0] == "The orders table lists order #1044"
    assert sign_in.expect[1] == TextExpectation(text="794.36") and isinstance(sign_in.expect[2], UrlExpectation)
    assert not sign_in.deterministic and register.deterministic and hours.goals[0].startswith("Find the weekday")
    assert suite.case_id(register) == "library-smoke/register-a-member"


def test_case_names_in_any_script_are_their_own_cases(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: Boutique\ncases:\n  - name: ログイン\n    task: t\n  - name: 検索\n    task: t\n  - name: Café\n    task: t\n")
    suite = load_suite(path, {}, {})
    assert [suite.case_id(case) for case in suite.cases] == ["boutique/ログイン", "boutique/検索", "boutique/café"]


def test_long_case_names_that_differ_past_the_cut_are_their_own_cases(tmp_path):
    # their directories, cache entries and ids were cut at 80 characters: refused as names that "differ only in
    # punctuation" (or, as pytest ids, one test replayed the other's cached actions)
    from surfer.agent.rundir import slugify

    long = "Check that the checkout page shows the right total for a basket with many items and a coupon "
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\ncases:\n  - name: {long}applied\n    task: t\n  - name: {long}removed\n    task: t\n"
                    "  - name: Short one\n    task: t\n")
    suite = load_suite(path, {}, {})
    applied, removed, short = (suite.case_id(case) for case in suite.cases)
    assert applied != removed and len(applied) == len(removed) == len("s/") + 80
    assert applied.startswith("s/check-that-the-checkout-page-shows-the-right-total-for-a-basket-with-many-")
    assert short == "s/short-one"  # (a name that fits is as it was: its cache entry is where it was)
    assert slugify("Prix 🍕 " * 30, 80, distinct=True) == slugify("prix 🚀 " * 30, 80, distinct=True)  # the same letters


def test_a_case_path_without_base_url_is_a_file_beside_the_suite(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ncases:\n  - name: c\n    url: ./pages/a b.html\n    task: t\n")
    suite = load_suite(path, {}, {})  # (wherever surfer runs from, as a storage state's path)
    assert suite.resolve_url(suite.cases[0].url) == (tmp_path / "pages" / "a b.html").as_uri()
    assert suite.resolve_url("../x.html") == (tmp_path.parent / "x.html").as_uri()
    assert suite.resolve_url("https://example.com/") == "https://example.com/"


def test_a_base_url_without_a_scheme_is_read_as_an_address_bar_reads_it(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nbase_url: '{{APP}}'\ncases:\n  - name: c\n    url: login.html\n    task: t\n")
    suite = load_suite(path, {}, {"APP": "localhost:3000/app/"})  # (it opened 'login.html', and approved nothing)
    assert suite.resolve_url(suite.cases[0].url) == "http://localhost:3000/app/login.html"
    assert suite.confirm_settings(suite.cases[0]) == {"approve_domains": ["localhost:3000"]}
    assert load_suite(path, {}, {"APP": "shop.example.com"}).base_url == "https://shop.example.com"


def test_var_flags_override_suite_vars_which_override_the_environment(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nvars: {who: suite}\ncases:\n  - name: c\n    task: Greet {{who}} and {{HOME_TOWN}}\n")
    env = {"HOME_TOWN": "Paris", "who": "environment"}
    assert load_suite(path, {}, env).cases[0].task == "Greet suite and Paris"
    assert load_suite(path, {"who": "flag"}, env).cases[0].task == "Greet flag and Paris"


@pytest.mark.parametrize(
    "body, line, message",
    [
        ("name: s\ncases:\n  - name: c\n    steps: [a]\n    expect:\n      - {text: ok}\n      - {colour: red}\n",
         7, "cases[0].expect[1]: an expectation is a sentence"),
        ("name: s\ncases:\n  - name: c\n    steps: [a]\n    retries: many\n", 5, "cases[0].retries: Input should be a valid integer"),
        ("name: s\ncases:\n  - name: c\n    url: /x\n", 3, "cases[0]: a case needs exactly one of 'steps'"),
        ("name: s\ncases:\n  - name: c\n    task: ' '\n", 4, "cases[0].task: the task must not be blank"),
        ("name: s\ncases:\n  - name: c\n    task: t\n    expect: [{url: '(unclosed'}]\n", 5, "cases[0].expect[0].url: not a valid regular expression"),
        ("name: s\ncases:\n  - name: c\n    task: t\n  - name: d\n    task: Use {{nowhere}}\n", 6,
         "cases[1].task: variable {{nowhere}} is not defined"),
        ("name: s\nbase_url: 'http://x/{{secret:HOME}}'\ncases:\n  - name: c\n    task: t\n", 2,
         "base_url: secrets may appear only in steps and task"),
        ("name: s\nmodel: {max_steps: 0}\ncases:\n  - name: c\n    task: t\n", 2, "model.max_steps: Input should be greater"),
        ("name: s\ncases:\n  - name: c\n    task: t\n   bad: [\n", 5, "not valid YAML"),
        # a misspelt key names the key it may be, at every level (pydantic's own words reached users raw)
        ("name: s\nconcurency: 3\ncases:\n  - name: c\n    task: t\n", 2, "concurency: unknown key (did you mean 'concurrency'?)"),
        ("name: s\ncases:\n  - name: c\n    task: t\n    expects: [{text: a}]\n", 5,
         "cases[0].expects: unknown key (did you mean 'expect'?)"),
        ("name: s\ntimeouts: {steps: 3}\ncases:\n  - name: c\n    task: t\n", 2, "timeouts.steps: unknown key (did you mean 'step'?)"),
        ("name: s\nmodel: {profle: holo2}\ncases:\n  - name: c\n    task: t\n", 2, "model.profle: unknown key (did you mean 'profile'?)"),
        ("name: s\nmodel:\n  max_steps: 3\n  policy: {modle: x}\ncases:\n  - name: c\n    task: t\n", 4,
         "model.policy.modle: unknown key (did you mean 'model'?)"),  # (its own line, not the line of `model:`)
        ("name: s\ncases:\n  - name: c\n    task: t\n    colour: red\n", 5, "cases[0].colour: unknown key; the keys here are: name, url,"),
        ("name: s\ncases:\n  - name: c\n    task: t\n  - 42\n", 5, "cases[1]: a case is a mapping of keys (`key: value` lines), not a number"),
        ("name: s\ncases:\n  - name: c\n    steps: Click it\n", 4, "cases[0].steps: must be a list (`[a, b]`, or one `- item` a line), not the text 'Click it'"),
        ("cases:\n  - task: t\n", 2, "cases[0].name: missing: this key is required"),
        ("name: s\ncases: []\n", 2, "cases: the suite has no cases"),
        ("name: s\ncases:\n  - name: Café\n    task: t\n", 3, "not UTF-8 text (byte 0xe9): save the suite file as UTF-8"),
        # a step or an expectation with ': ' in it is a mapping to YAML; a key given twice kept only its last value
        ("name: s\ncases:\n  - name: c\n    steps:\n      - 'Open the cart'\n      - Sign in: as alice\n", 6,
         "cases[0].steps[1]: must be text, but the line was read as a mapping ('Sign in': 'as alice') because of the ': '"),
        ("name: s\ncases:\n  - name: c\n    task: t\n    expect: [The page says: hi]\n", 5,
         "cases[0].expect[0]: an expectation is a sentence for the validator, or one of {text: ...}, {url: ...}, "
         "{answer: ...}; the line was read as a mapping"),
        ("name: s\ncases:\n  - name: 404\n    task: t\n", 3, "cases[0].name: must be text, not a number (quote it: '404')"),
        # a variable's value is one problem (not one for each type it could have been), and said as one
        ("name: s\nvars: {users: [a, b]}\ncases:\n  - name: c\n    task: t\n", 2,
         "vars.users: a variable is text, a number or true/false, not a list"),
        ("name: s\ncases:\n  - name: c\n    task: t\n    expect: [{text: a}]\n    tags: [x]\n    expect: [{url: b}]\n", 7,
         "cases[0].expect: given twice in one mapping (first at line 5); YAML keeps only the last"),
        ("name: s\ncases:\n  - name: Prix 🍕\n    task: t\n  - name: prix 🚀\n    task: t\n", 1,
         "cases 'Prix 🍕' and 'prix 🚀' differ only in punctuation or symbols, and would share the directory 'prix'"),
    ],
)
def test_a_bad_suite_names_file_line_and_field(tmp_path, body, line, message):
    path = tmp_path / "bad.yaml"
    path.write_bytes(body.encode("latin-1") if message.startswith("not UTF-8") else body.encode())
    with pytest.raises(SuiteError) as info:
        load_suite(path, {}, {"HOME": "/root"})
    assert f"{path}:{line}: " in str(info.value)
    assert message in str(info.value) and "more problem" not in str(info.value)


def test_an_unset_secret_is_refused_for_the_cases_that_run_only(tmp_path):
    # a CI job that runs the smoke cases needs no secret of the admin ones
    from surfer.agent.config import AgentConfig
    from surfer.apps.qa_command import selector
    from surfer.qa.runner import QaRunner, SuiteRun

    path = tmp_path / "s.yaml"
    path.write_text("name: s\ncases:\n  - name: admin\n    steps:\n      - Type {{secret:QA_TEST_UNSET_SECRET}}\n"
                    "    tags: [admin]\n  - name: home\n    task: t\n    tags: [smoke]\n")
    suite = load_suite(path, {}, {})
    smoke = QaRunner([SuiteRun(suite, AgentConfig())], "unused", select=selector(["smoke"], None), environ={})
    assert [c.case.name for c in smoke.cases] == ["home"]
    with pytest.raises(SuiteError) as info:
        QaRunner([SuiteRun(suite, AgentConfig())], "unused", environ={})
    assert str(info.value) == f"{path}:5: cases[0].steps[0]: secret QA_TEST_UNSET_SECRET is not set in the environment"

    # a secret that comes through a variable is one too: its line is named, and it is kept to steps and task
    path.write_text("name: s\nvars: {pw: '{{secret:QA_TEST_UNSET_SECRET}}'}\ncases:\n  - name: c\n    steps:\n      - Type {{pw}}\n")
    assert load_suite(path, {}, {}).unset_secrets == {"c": f"{path}:6: cases[0].steps[0]: secret QA_TEST_UNSET_SECRET is not set in the environment"}
    path.write_text("name: s\nvars: {pw: '{{secret:QA_TEST_UNSET_SECRET}}'}\ncases:\n  - name: c\n    url: /x/{{pw}}\n    task: t\n")
    with pytest.raises(SuiteError, match=r"s.yaml:5: cases\[0\].url: secrets may appear only in steps and task"):
        load_suite(path, {}, {"QA_TEST_UNSET_SECRET": "v"})


def test_surfer_qa_exits_2_on_a_bad_suite(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: s\ncases:\n  - name: c\n    stepz: [a]\n")
    proc = surfer("qa", str(path), "--out", str(tmp_path / "out"))  # (in this process: tests/inprocess.py)
    assert proc.returncode == 2, proc.stderr
    assert f"{path}:4: cases[0].stepz: unknown key (did you mean 'steps'?)" in " ".join(proc.stderr.split())
    assert not (tmp_path / "out").exists()  # nothing ran


def test_a_huge_expectation_is_quoted_in_part_in_messages(tmp_path):
    # a 200 KB text was written whole into every message of its failure (the console, JUnit thrice, the Markdown
    # summary, which GitHub refuses past 1 MiB)
    from surfer.qa.suite import describe_expectation

    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\ncases:\n  - name: c\n    task: t\n    expect:\n      - text: '{'Thank you ' * 500}'\n"
                    f"      - answer: '{'9:00|' * 100}x'\n      - {'The page is fine. ' * 50}\n")
    text, answer, sentence = (describe_expectation(e) for e in load_suite(path, {}, {}).cases[0].expect)
    assert text == f"text {'Thank you ' * 20!r}… (5000 characters) is visible"
    assert answer == f"answer matches {'9:00|' * 40!r}… (501 characters)"
    assert sentence == "The page is fine. " * 11 + "Th… (899 characters)"
    assert describe_expectation("Short enough") == "Short enough"


def test_surfer_qa_takes_a_folder_of_suites(tmp_path):
    # `surfer qa tests/qa/` (as Playwright and pytest take a folder): its *.yaml and *.yml files, subfolders too
    from surfer.apps.qa_command import suite_files

    folder = tmp_path / "qa"
    (folder / "admin").mkdir(parents=True)
    (folder / ".github").mkdir()
    for name in ("b.yaml", "a.yml", "admin/c.yaml", ".github/ci.yml", "notes.txt"):
        (folder / name).write_text("name: s\ncases:\n  - name: c\n    task: t\n")
    assert suite_files([folder, folder / "a.yml"]) == [folder / "a.yml", folder / "admin" / "c.yaml", folder / "b.yaml"]
    (folder / "admin" / "c.yaml").write_text("name: c\ncases:\n  - name: c\n    tsk: t\n")
    proc = surfer("qa", str(folder), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and f"{folder / 'admin' / 'c.yaml'}:4: cases[0].tsk: unknown key (did you mean 'task'?)" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = surfer("qa", str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "is a folder with no suite file (*.yaml, *.yml) in it" in proc.stderr


def test_the_qa_guide_shows_the_sample_suite_as_it_is():
    """The guide includes the file itself at build time (a snippet), so it cannot drift."""
    guide = (SAMPLE.parents[2] / "docs" / "guides" / "qa.md").read_text()
    assert '<!-- sample-suite -->\n```yaml\n--8<-- "examples/qa/library.yaml"\n```' in guide


def test_tag_and_grep_select_cases(tmp_path):
    from surfer.agent.config import AgentConfig
    from surfer.apps.qa_command import selector
    from surfer.qa.runner import QaRunner, SuiteRun

    suite = load_suite(SAMPLE, {"demo_url": "http://127.0.0.1:9/"}, {"LIBRARY_PASSWORD": "s3cret-value"})

    def chosen(tags, grep, invert=None):  # type: ignore[no-untyped-def]
        runner = QaRunner([SuiteRun(suite, AgentConfig())], "unused", select=selector(tags, grep, grep_invert=invert),
                          environ={"LIBRARY_PASSWORD": "x" * 8})
        return [c.case.name for c in runner.cases]

    assert chosen([], None) == ["sign in and read an order", "register a member", "opening hours"]
    assert chosen(["smoke"], None) == ["sign in and read an order", "register a member"]
    assert chosen(["smoke"], "REGISTER") == ["register a member"]
    assert chosen(["nightly"], None) == []
    # --grep is a regular expression (any case, as Playwright's), --grep-invert leaves out what it matches
    assert chosen([], "^(sign|OPENING) ") == ["sign in and read an order", "opening hours"]
    assert chosen([], "(?-i:^Opening)") == [] and chosen([], "member$|hours$") == ["register a member", "opening hours"]
    assert chosen([], None, "order") == ["register a member", "opening hours"]
    assert chosen(["smoke"], "r", "^sign") == ["register a member"]
    bad = surfer("qa", str(SAMPLE), "--grep", "order(", "--out", str(tmp_path / "out"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "--grep 'order(' is no regular expression: missing ), unterminated subpattern" in bad.stderr
    assert not (tmp_path / "out").exists()

    # a suite's setup case runs whenever another of its cases does: they start with the state it saves
    (tmp_path / "signed.yaml").write_text(
        "name: s\nstorage_state: alice.json\ncases:\n  - name: sign in\n    setup: true\n    task: t\n"
        "  - name: orders\n    task: t\n    tags: [smoke]\n  - name: account\n    task: t\n")
    signed = load_suite(tmp_path / "signed.yaml", {}, {})
    for tags, grep, ids, expected in (([], "orders", None, ["sign in", "orders"]), (["smoke"], None, None, ["sign in", "orders"]),
                                      ([], None, {"s/account"}, ["sign in", "account"]), ([], "sign", None, ["sign in"])):
        runner = QaRunner([SuiteRun(signed, AgentConfig())], "unused", select=selector(tags, grep, ids), environ={})
        assert [c.case.name for c in runner.cases] == expected


def test_a_page_path_in_a_suite_without_base_url_names_the_missing_base_url(tmp_path):
    # '/orders' with no base_url is a file path to the browser: refused as a file URL, which did not say what was wrong
    (tmp_path / "s.yaml").write_text("name: s\ncases:\n  - name: c\n    url: /orders\n    task: t\n")
    proc = surfer("qa", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert proc.returncode == 2 and "if /orders is a page of your app, give the suite its base_url" in " ".join(proc.stderr.split())


def test_two_suites_with_one_name_exit_2(tmp_path):
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("name: shop\ncases:\n  - name: c\n    task: t\n")
    proc = surfer("qa", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "the suite name 'shop' is already used by" in " ".join(proc.stderr.split())
    (tmp_path / "b.yaml").write_text("name: Shop!\ncases:\n  - name: c\n    task: t\n")  # the same directory, 'shop'
    proc = surfer("qa", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and (f"the suite names 'shop' ({tmp_path / 'a.yaml'}) and 'Shop!' differ only in punctuation or "
                                     "symbols, and would share the directory 'shop'") in " ".join(proc.stderr.split())


async def test_visible_text_reads_the_frames_and_web_components_that_are_shown(browser_env, pages):
    # a `text:` expectation sees what a user sees: an iframe's text and a web component's too, not hidden ones'
    from surfer.qa.executor import QaEnvironment

    qa = QaEnvironment(await browser_env(pages.url("framed.html")), None, None)
    text = await qa.visible_text()
    assert "Outside the frame" in text and "Inside the frame" in text and "Inside a web component" in text
    assert "In a hidden frame" not in text and "In a hidden component" not in text and "color" not in text


def test_an_out_directory_that_holds_something_else_is_refused_and_kept(tmp_path):
    from surfer.qa.out_dir import foreign_output

    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\ncases:\n  - name: c\n    url: http://127.0.0.1:9/\n    task: t\n")
    project = tmp_path / "project"  # `--out .` in a project with a cases/ folder of its own
    (project / "cases").mkdir(parents=True)
    (project / "cases" / "mine.txt").write_text("keep")
    batch = tmp_path / "batch"  # a batch's output
    batch.mkdir()
    (batch / "results.jsonl").write_text('{"id": "q1", "status": "success"}\n')
    proc = surfer("qa", str(suite), "--out", str(project), "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert proc.returncode == 2 and "holds a cases/ folder of its own, not a QA run's" in " ".join(proc.stderr.split())
    assert foreign_output(batch) == "a results.jsonl of something else"
    assert (project / "cases" / "mine.txt").read_text() == "keep" and (batch / "results.jsonl").exists()
    earlier = tmp_path / "qa-out"  # an earlier QA run's output is replaced, as before
    (earlier / "cases" / "s" / "c" / "attempt-1").mkdir(parents=True)
    (earlier / "results.jsonl").write_text('{"id": "s/c", "suite": "s", "case": "c", "status": "passed"}\n')
    assert foreign_output(earlier) is None and foreign_output(tmp_path / "new") is None
    down = tmp_path / "app-down"  # an earlier QA run whose case could not start (its page did not open): a report, no attempt
    (down / "cases" / "s" / "c").mkdir(parents=True)
    (down / "cases" / "s" / "c" / "report.html").write_text("<html></html>")
    (down / "results.jsonl").write_text('{"id": "s/c", "suite": "s", "case": "c", "status": "error"}\n')
    assert foreign_output(down) is None


def test_outputs_that_cannot_be_written_are_refused_before_anything_runs(tmp_path):
    # found at the end of the run, they were a traceback with the run's reports lost
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\ncases:\n  - name: c\n    url: http://127.0.0.1:9/\n    task: t\n")
    (tmp_path / "reports").mkdir()
    (tmp_path / "a-file").write_text("mine")
    endpoint = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    for flags, said in (
        (["--junit", str(tmp_path / "reports")], f"--junit {tmp_path / 'reports'} is a directory: name the file to write"),
        (["--out", str(tmp_path / "a-file")], f"--out {tmp_path / 'a-file'} is a file: name a directory"),
        (["--html", str(tmp_path / "a-file" / "x.html")], f"--html {tmp_path / 'a-file' / 'x.html'}: a file is in the way"),
        # a report over another one, or over the run's own files in OUT: written over at the end, silently (exit 0)
        (["--junit", str(tmp_path / "r.xml"), "--html", str(tmp_path / "r.xml")],
         f"--junit and --html would both write {tmp_path / 'r.xml'}"),
        (["--markdown", str(tmp_path / "out" / "junit.xml")], f"--junit and --markdown would both write {tmp_path / 'out' / 'junit.xml'}"),
        (["--junit", str(tmp_path / "out" / "results.jsonl")],
         f"--junit {tmp_path / 'out' / 'results.jsonl'}: the run writes the cases' results there; name another file"),
        (["--html", str(tmp_path / "out" / "cases")], f"--html {tmp_path / 'out' / 'cases'}: the run writes the case directories there"),
        # found when the first case passed: a traceback, the run's reports lost
        (["--cache", str(tmp_path / "a-file" / "cache")], f"the action cache {tmp_path / 'a-file' / 'cache'}: {tmp_path / 'a-file'} is a file"),
    ):
        proc = surfer("qa", str(suite), *endpoint, *(["--out", str(tmp_path / "out")] if "--out" not in flags else []), *flags)
        assert proc.returncode == 2 and said in " ".join(proc.stderr.split()), proc.stderr
        assert "Traceback" not in proc.stderr and not (tmp_path / "out" / "cases").exists()
    assert (tmp_path / "a-file").read_text() == "mine"


async def test_a_cache_entry_that_cannot_be_written_leaves_the_case_as_it_ended(tmp_path):
    # (a read-only checkout, a full disk, a file in the way): the run ended in a traceback, no report written
    from surfer.agent.config import AgentConfig
    from surfer.qa.cache import ActionCache, CaseEntry
    from surfer.qa.runner import QaRunner, SuiteRun

    suite = load_suite(SAMPLE, {"demo_url": "http://127.0.0.1:9/"}, {"LIBRARY_PASSWORD": "s3cret-value"})
    runner = QaRunner([SuiteRun(suite, AgentConfig())], tmp_path / "out", environ={"LIBRARY_PASSWORD": "s3cret-value"})
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "library-smoke").write_text("in the way")
    cache = ActionCache(tmp_path / "cache")
    assert await runner._in_cache(cache.store, CaseEntry("library-smoke/opening-hours", "", [])) is None
    assert len(runner.cache_problems) == 1 and runner.cache_problems[0].startswith("store: [Errno ")
    assert (tmp_path / "cache" / "library-smoke").read_text() == "in the way"


def test_the_formats_page_names_every_field_of_a_case_line(tmp_path):
    import re

    from surfer.qa.outcomes import CaseReport

    suite = load_suite(SAMPLE, {"demo_url": "http://127.0.0.1:9/"}, {"LIBRARY_PASSWORD": "s3cret-value"})
    record = CaseReport(suite.name, suite.cases[0], suite.case_id(suite.cases[0]), tmp_path / "cases" / "c").to_record(tmp_path)
    page = (SAMPLE.parents[2] / "docs" / "reference" / "formats.md").read_text()
    table = page.split("A case's line:", 1)[1].split("\n\n", 2)[1]
    documented = {name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert documented == set(record)


def test_junit_is_xml_whatever_the_model_or_page_said(tmp_path):
    # a control character in a failure (a model's reason, a terminal colour code) made junit.xml unreadable to CI
    import xml.etree.ElementTree as ET

    from surfer.qa.outcomes import AttemptReport, CaseReport, QaSummary
    from surfer.qa.reports import junit_xml

    suite = load_suite(SAMPLE, {"demo_url": "http://127.0.0.1:9/"}, {"LIBRARY_PASSWORD": "s3cret-value"})
    case = CaseReport(suite.name, suite.cases[0], suite.case_id(suite.cases[0]), tmp_path / "c", status="failed")
    attempt = AttemptReport(1, str(tmp_path / "c" / "attempt-1"), status="failed", failure="the validator said \x1b[2mno\x1b[0m\x08")
    case.attempts.append(attempt)
    root = ET.fromstring(junit_xml(QaSummary(tmp_path, [case], 1.0), tmp_path / "junit.xml").split("\n", 1)[1])
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and failure.get("message") == "the validator said \\x1b[2mno\\x1b[0m\\x08"
    # valid against Surefire's strict schema: a testcase holds no properties (the case's are its testsuite's), its
    # elements come in the schema's order, and a flaky attempt's record is a stackTrace, not text
    flaky = CaseReport(suite.name, suite.cases[1], suite.case_id(suite.cases[1]), tmp_path / "f", status="flaky")
    flaky.attempts += [AttemptReport(1, "a1", status="failed", failure="no 9:00"), AttemptReport(2, "a2", status="error", failure="gone"),
                       AttemptReport(3, "a3", status="failed", failure="no 10:00"), AttemptReport(4, "a4", status="passed")]
    root = ET.fromstring(junit_xml(QaSummary(tmp_path, [case, flaky], 1.0), tmp_path / "junit.xml").split("\n", 1)[1])
    order = ["failure", "rerunFailure", "flakyFailure", "skipped", "error", "rerunError", "flakyError", "system-out", "system-err"]
    assert [child.tag for child in root.find("testsuite")] == ["properties", "testcase", "testcase"]
    for testcase in root.iter("testcase"):
        tags = [child.tag for child in testcase]
        assert set(tags) <= set(order) and tags == sorted(tags, key=order.index), tags
        for record in (e for e in testcase if e.tag.startswith("flaky")):
            assert not (record.text or "").strip() and [c.tag for c in record] == ["stackTrace"] and record.get("type")
    assert [e.get("message") for e in root.findall("testsuite/testcase/flakyFailure")] == ["no 9:00", "no 10:00"]
    assert root.find("testsuite/testcase/flakyError/stackTrace").text == "attempt 2 (try): error — gone"
    props = {p.get("name"): p.get("value") for p in root.findall("testsuite/properties/property")}
    assert props[f"{case.case.name}.status"] == "failed" and props[f"{flaky.case.name}.flaky"] == "true"


def test_a_missing_state_file_is_refused_for_the_cases_that_run_only(tmp_path):
    # a CI job that runs the smoke cases needs no sign-in of the admin ones
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\ncases:\n  - name: home\n    url: http://127.0.0.1:9/\n    task: t\n    tags: [smoke]\n"
                     "  - name: admin\n    url: http://127.0.0.1:9/\n    task: t\n    storage_state: admin.json\n")
    (tmp_path / "reports").mkdir()  # (a --junit refused after the state files are checked: nothing runs)
    args = [str(suite), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "out"), "--junit", str(tmp_path / "reports")]
    every = surfer("qa", *args)
    assert every.returncode == 2 and "admin.json does not exist" in " ".join(every.stderr.split())
    smoke = surfer("qa", *args, "--tag", "smoke")
    assert smoke.returncode == 2 and "admin.json" not in smoke.stderr and "is a directory" in smoke.stderr
