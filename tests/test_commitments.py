"""The commitment rules (issue 22): figures on the labelled and held-out sets,
and the typing, description and vocabulary rules one by one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from surfer.agent.commitments import (
    Commitments, DEFAULT_VOCABULARY, click_commitment, described_commitment, typing_commitment,
)
from surfer.agent.commitments_eval import NEVER_SENSITIVE, evaluate, format_table, load_items, old_rule
from surfer.agent.confirm import SensitiveRules
from surfer.core.actions import Dialog
from surfer.core.elements import ElementFacts, FieldFacts, FormFacts

DATA = Path(__file__).with_name("data")
LABELLED = load_items(DATA / "sensitive_elements.jsonl")
HOLDOUT = load_items(DATA / "sensitive_elements_holdout.jsonl")


# ------------------------------------------------------------------ the labelled set


def test_the_labelled_set_is_large_and_covers_the_categories():
    assert len(LABELLED) >= 600
    categories = {i["category"] for i in LABELLED}
    assert set(NEVER_SENSITIVE) | {"menu_opener", "login", "payment_form", "commitment_buy", "commitment_delete"} <= categories
    assert len({i["id"] for i in LABELLED}) == len(LABELLED)
    assert sum(i["expected"] for i in LABELLED) >= 250
    for i in LABELLED + HOLDOUT:
        assert i["kind"] in ("click", "type", "type_submit")
        assert ElementFacts.from_dict(i["element"]) is not None


def test_element_facts_on_the_labelled_set():
    report = evaluate(LABELLED, "facts")
    for category in NEVER_SENSITIVE:
        assert report["categories"][category]["fp"] == 0, (category, report["false_positives"])
    assert report["recall"] >= 0.95, report["false_negatives"]
    assert report["precision"] >= 0.95, report["false_positives"]


def test_descriptions_alone_on_the_labelled_set():
    """The desktop path knows less (no role, no form, no origin) but never flags navigation."""
    report = evaluate(LABELLED, "described")
    for category in NEVER_SENSITIVE:
        assert report["categories"][category]["fp"] == 0, (category, report["false_positives"])
    assert report["recall"] >= 0.85
    assert report["precision"] >= 0.90


# ------------------------------------------------------------------ the held-out set (written after the rules froze)

# As measured when the held-out set was first run; the rules were not changed after.
HOLDOUT_KNOWN_FALSE_POSITIVES = {
    "ho-grocery-dialog_benign-0152",  # "OK" under "Your payment details were updated.": 'payment' reads as a commitment
}
HOLDOUT_KNOWN_FALSE_NEGATIVES = {
    "ho-marketplace-commitment_buy-0159",  # "Submit offer": offer is not a known object of submit
    "ho-marketplace-commitment_buy-0160",  # "Bid": bid is not a commitment verb on its own
    "ho-insurance-commitment_buy-0167",  # "Buy this policy": a name ending in 'policy' reads as a title
    "ho-bank2-commitment_delete-0194",  # "Cancel direct debit": direct debit is not a known object of cancel
    "ho-forum-commitment_send-0198",  # "Submit" of a new-thread form: a generic submit is not judged by its form
    "ho-bank2-commitment_transfer-0208",  # "Move money": not in the vocabulary
    "ho-insurance-commitment_subscription-0214",  # "Cancel my policy": ends in 'policy' (a title word)
    "ho-airline-payment_typing-0232",  # "Security code (3 digits on the back)": 'security code' alone is taken for a sign-in code
}


def test_element_facts_on_the_held_out_set():
    report = evaluate(HOLDOUT, "facts")
    for category in NEVER_SENSITIVE:
        assert report["categories"][category]["fp"] == 0, (category, report["false_positives"])
    assert {e["id"] for e in report["false_positives"]} == HOLDOUT_KNOWN_FALSE_POSITIVES
    assert {e["id"] for e in report["false_negatives"]} == HOLDOUT_KNOWN_FALSE_NEGATIVES
    # the goal was 90 %; measured 68 of 76 = 89.5 %, reported as it came out (see the lists above)
    assert report["recall"] >= 0.89
    assert report["precision"] >= 0.95


def test_descriptions_alone_on_the_held_out_set():
    report = evaluate(HOLDOUT, "described")
    for category in ("nav_link", "sort_filter", "search"):
        assert report["categories"][category]["fp"] == 0, (category, report["false_positives"])
    # "the Transfer between accounts tab" reads as the imperative "Transfer": a known miss of the desktop path
    assert [e["id"] for e in report["false_positives"] if e["id"].split("-")[2] == "tab"] == ["ho-bank2-tab-0042"]
    assert report["recall"] >= 0.80


def test_the_old_word_rule_is_much_worse_regression_witness():
    old, new = evaluate(LABELLED, "old"), evaluate(LABELLED, "facts")
    assert old["categories"]["nav_link"]["fp"] >= 50  # "Orders", "Order history", "Payment methods", ...
    assert old["categories"]["tab"]["fp"] >= 10 and old["categories"]["sort_filter"]["fp"] >= 10
    assert old["precision"] < 0.6 and old["recall"] < 0.7
    assert new["confusion"]["fp"] * 10 < old["confusion"]["fp"]
    assert old_rule("the 'Orders' link") and not click_commitment(ElementFacts(role="link", name="Orders", tag="a", href="/orders"))


def test_the_report_renders_a_markdown_table():
    table = format_table([evaluate(LABELLED, how) for how in ("facts", "described", "old")], title="labelled")
    assert "| element facts (browser) |" in table and "| nav_link |" in table
    json.dumps(evaluate(HOLDOUT))  # JSON-safe


# ------------------------------------------------------------------ clicks


def button(name: str, **kw) -> ElementFacts:
    kw.setdefault("tag", "button")
    kw.setdefault("type", "button")
    return ElementFacts(role="button", name=name, **kw)


@pytest.mark.parametrize("name", ["Orders", "Order history", "Sort order", "Payment methods", "Remove filter",
                                  "Send feedback", "Delete search text", "Clear", "Proceed to checkout", "Cancel",
                                  "Add to cart", "Transfer history", "Subscribe", "Upgrade", "Start free trial"])
def test_benign_button_names(name):
    assert click_commitment(button(name)) is None


@pytest.mark.parametrize("name", ["Place order", "Buy now", "Pay $42.10", "Purchase", "Confirm purchase", "Complete order",
                                  "Delete account", "Delete", "Remove", "Transfer funds", "Send money", "Send",
                                  "Unsubscribe", "Cancel subscription", "Close account", "Empty trash", "Submit payment",
                                  "Confirm transfer", "Withdraw", "Donate", "Subscribe - $9.99/month", "Yes, delete"])
def test_commitment_button_names(name):
    assert click_commitment(button(name))


@pytest.mark.parametrize("name, expected", [
    ("Jetzt kaufen", "buy"), ("Konto löschen", "delete"), ("Zahlungspflichtig bestellen", "buy"), ("Payer 42,10 €", "pay"),
    ("Supprimer le compte", "delete"), ("Comprar ahora", "buy"), ("Invia", "send"), ("Betalen", "pay"),
    ("Купить сейчас", "buy"), ("立即购买会员", "buy"), ("确认支付", "pay"), ("削除", "delete"),
    ("Meine Bestellungen", None), ("Filter löschen", None), ("Eliminar filtro", None), ("購入履歴", None),
    ("支付方式", None), ("Warenkorb", None), ("发送验证码", None), ("删除线", None), ("获取验证码并发送", None)])
def test_commitments_in_other_languages(name, expected):
    """Where these languages put the verb: first, last ("Konto löschen"), inside a name without spaces ("立即购买会员")."""
    assert DEFAULT_VOCABULARY.commitment(name) == expected


def test_described_in_other_languages_and_quotes():
    assert described_commitment("the „Jetzt kaufen“ button") == "it presses 'Jetzt kaufen' (as described)"
    assert described_commitment("the 「購入する」 button") == "it presses '購入する' (as described)"
    assert described_commitment("the « Supprimer » button") == "it presses 'Supprimer' (as described)"
    assert described_commitment("the Ja button in the „Datei löschen?“ dialog")
    assert described_commitment("the «Mes commandes» link") is None


def test_sensitive_words_in_any_script():
    rules = Commitments.from_sensitive_words(["归档", "архивировать", "archivieren"])
    assert rules.click(button("立即归档")) and rules.click(button("Архивировать")) and rules.click(button("Alle archivieren"))
    assert rules.click(button("Archiv")) is None and rules.click(button("Переслать")) is None


def test_reasons_are_human_readable():
    assert click_commitment(button("Place order")) == "it presses the 'Place order' button"
    pay = FormFacts(fields=[FieldFacts(name="Card number", type="text", autocomplete="cc-number")], submit_name="Continue",
                    has_payment_fields=True)
    assert click_commitment(button("Continue", type="submit", form=pay)) == "it submits a form with payment fields"


def test_links_tabs_openers_and_groups_are_never_commitments():
    assert click_commitment(ElementFacts(role="link", name="Delete account", tag="a", href="/settings/delete")) is None
    assert click_commitment(ElementFacts(role="tab", name="Buy", tag="button", group="tablist")) is None
    assert click_commitment(button("Delete…", haspopup="dialog")) is None
    assert click_commitment(button("Pay", group="radiogroup")) is None
    assert click_commitment(ElementFacts(role="button", name="Delete this repository", tag="summary")) is None
    # a link that goes nowhere acts by script: judged like a button
    assert click_commitment(ElementFacts(role="link", name="Delete", tag="a", href="#"))


def test_context_tells_a_cart_line_from_a_filter_chip():
    assert click_commitment(button("Remove", context="Cart AirPods Pro $249.00 Qty 1"))
    assert click_commitment(button("Remove", context="Active filters: Brand: Sony")) is None
    assert click_commitment(button("Delete", group="toolbar", context="3 conversations selected"))
    assert click_commitment(button("Send", dialog="Send feedback: tell us what you think")) is None
    assert click_commitment(button("Send", dialog="New Message: To bob@example.com"))


def test_dialog_confirmations():
    assert click_commitment(button("OK", dialog="Delete 3 conversations? This cannot be undone."))
    assert click_commitment(button("OK", dialog="Changes saved")) is None
    assert click_commitment(button("Cancel", dialog="Delete 3 conversations?")) is None
    for yes, said in (("OK", "Möchten Sie diese 3 Dateien wirklich löschen?"), ("はい", "このファイルを削除しますか？"),
                      ("Oui", "Voulez-vous vraiment supprimer ce compte ?"), ("Да", "Удалить 3 файла?")):
        assert click_commitment(button(yes, dialog=said)), said
    assert click_commitment(button("确定", dialog="设置已保存")) is None  # "settings saved"
    assert click_commitment(button("Ja", dialog="Filter löschen?")) is None
    rules = SensitiveRules()
    assert rules.reason(Dialog(response="accept"), "https://a.example/", "Open dialog: confirm: 确定要删除吗？") == (
        "it may accept a dialog that mentions '删除'")
    assert rules.reason(Dialog(response="accept"), "https://a.example/", "Open dialog: confirm: Änderungen speichern?") is None


def test_plain_content_and_no_facts():
    assert click_commitment(None) is None
    assert click_commitment(ElementFacts(role="", name="Place order", tag="span", plain=True)) is None


# ------------------------------------------------------------------ typing

LOGIN = FormFacts(fields=[FieldFacts(name="Email", type="email", autocomplete="username"),
                          FieldFacts(name="Password", type="password", autocomplete="current-password")],
                  submit_name="Sign in", has_current_password=True)
CARD = FormFacts(fields=[FieldFacts(name="Card number", type="text", autocomplete="cc-number"),
                         FieldFacts(name="CVC", type="text", autocomplete="cc-csc")],
                 submit_name="Pay", has_payment_fields=True)
SHOP = "https://shop.example"


def field_el(name: str, form: FormFacts, origin: str = SHOP, **kw) -> ElementFacts:
    kw.setdefault("type", "text")
    return ElementFacts(role="textbox", name=name, tag="input", origin=origin, form=form, **kw)


def test_typing_into_a_login_form_never_commits():
    for origin in (SHOP, "https://accounts.idp.example"):
        password = field_el("Password", LOGIN, origin, type="password", autocomplete="current-password")
        assert typing_commitment(password, SHOP) is None
        assert typing_commitment(password, SHOP, submit=True) is None


def test_typing_a_card_number_depends_on_the_origin():
    same = field_el("Card number", CARD, SHOP, autocomplete="cc-number")
    other = field_el("Card number", CARD, "https://pay.example", autocomplete="cc-number")
    assert typing_commitment(same, SHOP) is None
    assert typing_commitment(other, SHOP) == \
        "it types into a card-number field on pay.example (not the task's start site)"
    assert typing_commitment(same, "http://shop.example") is not None  # another scheme is another origin
    assert "security-code" in typing_commitment(field_el("CVC", CARD, "https://pay.example", autocomplete="cc-csc"), SHOP)


def test_typing_then_enter_judges_the_form_submission():
    same = field_el("Card number", CARD, SHOP, autocomplete="cc-number")
    assert typing_commitment(same, SHOP, submit=True) == "it submits a form with payment fields (typing then Enter)"
    search = FormFacts(fields=[FieldFacts(name="Search", type="search")], submit_name="Search")
    assert typing_commitment(field_el("Search", search), SHOP, submit=True) is None
    chat = FormFacts(fields=[FieldFacts(name="Message", type="textarea")], submit_name="Send message")
    assert typing_commitment(field_el("Message", chat), SHOP, submit=True)
    assert typing_commitment(field_el("Message", chat), SHOP) is None


def test_new_passwords_commit_on_another_origin_unless_signing_up():
    change = FormFacts(fields=[FieldFacts(name="Current password", type="password", autocomplete="current-password"),
                               FieldFacts(name="New password", type="password", autocomplete="new-password")],
                       submit_name="Change password", has_new_password=True, has_current_password=True)
    signup = FormFacts(fields=[FieldFacts(name="Email", type="email", autocomplete="email"),
                               FieldFacts(name="Create password", type="password", autocomplete="new-password")],
                       submit_name="Create account", has_new_password=True)
    new = dict(type="password", autocomplete="new-password")
    assert typing_commitment(field_el("New password", change, "https://id.example", **new), SHOP)
    assert typing_commitment(field_el("New password", change, SHOP, **new), SHOP) is None
    assert typing_commitment(field_el("Create password", signup, "https://id.example", **new), SHOP) is None


# ------------------------------------------------------------------ descriptions (desktop)


@pytest.mark.parametrize("description", [
    "the 'Orders' link", "Orders", "Order history tab", "Payment methods", "Sort order dropdown", "Remove filter chip",
    "click the Orders button in the toolbar", "the 'Send feedback' button", "Delete search text", "the Checkout button",
    "Send money in the navigation", "the 'Delete' button next to the search box",
])
def test_described_nouns_are_not_commitments(description):
    assert described_commitment(description) is None


@pytest.mark.parametrize("description", [
    "the 'Place order' button", "click Delete account", "Pay $42.10 button", "the Delete button next to the email from Bob",
    "Delete in the message's context menu", "the Yes button in the 'Delete this file?' dialog", "the trash icon",
    "the blue Send button in the compose window",
])
def test_described_commitments(description):
    assert described_commitment(description)


def test_described_typing():
    assert described_commitment("the card number field", typing=True)
    assert described_commitment("the password field", typing=True) is None
    assert described_commitment("the search box", typing=True, submit=True) is None
    assert described_commitment("the message box", typing=True, submit=True)


# ------------------------------------------------------------------ vocabulary and configuration


def test_extra_and_exempt_phrases():
    rules = Commitments(extra=["approve", "merge pull request"], exempt=["remove from wishlist"])
    assert rules.click(button("Approve"))
    assert rules.click(button("Merge pull request"))
    assert rules.click(ElementFacts(role="link", name="Approve", tag="a", href="/approvals")) is None
    assert rules.click(button("Approvals")) is None
    assert rules.click(button("Remove from wishlist")) is None
    assert click_commitment(button("Remove from wishlist"))  # the default still asks
    assert rules.described("the Approve button") and rules.described("the Approvals tab") is None


def test_sensitive_words_keep_a_meaning():
    rules = Commitments.from_sensitive_words(["buy", "order", "checkout", "archive"])
    assert rules.extra == ("archive",)  # the default words are the built-in vocabulary
    assert rules.click(button("Archive"))
    assert rules.click(button("Archived items")) is None
    assert rules.click(button("Orders")) is None and rules.click(button("Order now"))


def test_vocabulary_reads_names():
    assert DEFAULT_VOCABULARY.commitment("Place order") == "buy"
    assert DEFAULT_VOCABULARY.commitment("$4.99") == "buy"
    assert DEFAULT_VOCABULARY.commitment("Remove", context="Active filters") is None
    assert DEFAULT_VOCABULARY.commitment("Pay later", context="Filter by payment type") is None


def test_element_facts_round_trip():
    el = ElementFacts(role="button", name="Pay", tag="button", type="submit", form=CARD, dialog="Pay $5?", plain=False)
    data = el.to_dict()
    assert ElementFacts.from_dict(json.loads(json.dumps(data))) == el
    assert ElementFacts.from_dict(None) is None
    assert ElementFacts.from_dict({"role": "LINK", "name": "x", "unknown": 1}).role == "link"


def test_keys_that_activate_the_focused_element():
    from surfer.agent.commitments import activating_key

    assert [activating_key(k) for k in ("Enter", "enter", "return", "Control+Enter", "cmd+enter", " ", "space")] == \
        ["Enter", "Enter", "Enter", "Enter", "Enter", "Space", "Space"]
    assert [activating_key(k) for k in ("Tab", "Shift+Tab", "Control+a", "ArrowDown", "Escape", "Shift+Space")] == [None] * 6
