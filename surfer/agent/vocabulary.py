"""The words of commitments: which verb phrases buy, pay, delete, remove, send,
transfer, unsubscribe or cancel, which objects make them harmless ("Remove
filter"), and the role and context words that say a control is not one. The
rules that apply them to an element or a description are in `commitments`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Optional


STANDALONE: dict[str, str] = {
    # an imperative that commits with or without an object
    "buy": "buy", "purchase": "buy", "preorder": "buy", "rent": "buy", "sell": "buy",
    "pay": "pay", "donate": "pay",
    "delete": "delete", "remove": "delete", "erase": "delete", "destroy": "delete", "purge": "delete", "wipe": "delete",
    "move to trash": "delete", "move to bin": "delete", "move to recycle bin": "delete", "revoke": "delete",
    "send": "send", "publish": "send", "post": "send", "tweet": "send",
    "transfer": "transfer", "withdraw": "transfer", "wire": "transfer",
    "trash": "delete",
    "cash out": "transfer",
    "unsubscribe": "subscription", "downgrade": "subscription",
    "deactivate": "account", "terminate": "account",
}
# The same commitments in other languages, as shops and apps label their buttons (infinitives and imperatives).
# Besides where an English verb stands (first: "Löschen", "Comprar ahora"), they commit last too, where these
# languages put the verb ("Konto löschen", "Zahlungspflichtig bestellen", "立即购买"), and inside a run of
# Chinese or Japanese characters, which has no spaces (`tokens` splits it into characters).
FOREIGN: dict[str, str] = {
    # German
    "kaufen": "buy", "bestellen": "buy", "bezahlen": "pay", "löschen": "delete", "entfernen": "delete",
    "senden": "send", "absenden": "send", "überweisen": "transfer", "kündigen": "subscription", "abbestellen": "subscription",
    # French
    "acheter": "buy", "commander": "buy", "payer": "pay", "supprimer": "delete", "envoyer": "send",
    "résilier": "subscription", "désabonner": "subscription", "se désabonner": "subscription",
    # Spanish and Portuguese
    "comprar": "buy", "pagar": "pay", "eliminar": "delete", "borrar": "delete", "excluir": "delete", "apagar": "delete",
    "enviar": "send", "transferir": "transfer",
    # Italian
    "acquista": "buy", "acquistare": "buy", "ordina": "buy", "paga": "pay", "pagare": "pay", "elimina": "delete",
    "eliminare": "delete", "invia": "send", "inviare": "send",
    # Dutch
    "kopen": "buy", "betalen": "pay", "verwijderen": "delete", "verzenden": "send", "versturen": "send",
    "overmaken": "transfer",
    # Russian
    "купить": "buy", "заказать": "buy", "оплатить": "pay", "удалить": "delete", "отправить": "send",
    # Chinese and Japanese
    "购买": "buy", "購買": "buy", "購入": "buy", "下单": "buy", "提交订单": "buy", "注文する": "buy", "注文を確定": "buy", "支付": "pay",
    "付款": "pay", "支払": "pay", "删除": "delete", "刪除": "delete", "削除": "delete", "发送": "send", "送信": "send",
    "转账": "transfer", "振込": "transfer",
}
NEEDS_OBJECT: dict[str, tuple[str, frozenset[str]]] = {
    # a verb that commits only with one of these objects ("Cancel" alone dismisses a dialog)
    "order": ("buy", frozenset({"now", "it", "this", "again", "today", "online", "these", "for", "<amount>", "all"})),
    "place": ("buy", frozenset({"order", "bid", "trade"})),
    "cancel": ("subscription", frozenset({
        "subscription", "subscriptions", "membership", "plan", "order", "booking", "reservation", "trip", "flight",
        "account", "payment", "transfer", "autorenew", "renewal", "ticket", "trial", "service", "policy"})),
    "close": ("account", frozenset({"account"})),
    "end": ("subscription", frozenset({"membership", "subscription", "plan"})),
    "empty": ("delete", frozenset({"trash", "bin", "recycle", "spam", "cart", "basket", "deleted", "folder"})),
    "make": ("pay", frozenset({"payment", "transfer", "donation", "purchase", "deposit"})),
    "submit": ("pay", frozenset({"order", "payment", "transfer", "purchase", "bid", "donation"})),
    "confirm": ("pay", frozenset({
        "order", "purchase", "payment", "pay", "transfer", "booking", "reservation", "subscription", "upgrade", "deletion",
        "delete", "removal", "cancellation", "withdrawal", "donation", "bid", "sale", "trade"})),
    "complete": ("pay", frozenset({
        "order", "purchase", "payment", "booking", "reservation", "checkout", "transfer", "donation", "subscription",
        "upgrade"})),
    "authorize": ("pay", frozenset({"payment", "transfer", "charge", "transaction", "purchase"})),
    "authorise": ("pay", frozenset({"payment", "transfer", "charge", "transaction", "purchase"})),
    "approve": ("pay", frozenset({"payment", "transfer", "charge", "transaction", "purchase"})),
    "finish": ("pay", frozenset({"cancellation", "order", "purchase", "payment", "booking", "checkout"})),
    "start": ("subscription", frozenset({"subscription", "membership"})),
    "schedule": ("pay", frozenset({"payment", "transfer"})),
}
# a verb that commits when the name carries a price ("Subscribe - $9.99/month", "Upgrade for $8")
_PRICE_VERBS = frozenset({"subscribe", "upgrade", "renew", "join", "book", "reserve", "start", "get", "confirm",
                          "complete", "continue", "tip", "give"})
# the object makes the verb harmless
BENIGN_OBJECTS = frozenset({
    "filter", "filters", "search", "searches", "query", "text", "keyword", "keywords", "term", "sort", "sorting", "tag",
    "tags", "label", "labels", "chip", "chips", "selection", "highlight", "highlights", "format", "formatting",
    "attachment", "attachments", "recipient", "coupon", "promo", "voucher", "discount", "code", "codes", "feedback",
    "otp", "verification", "suggestion", "suggestions", "column", "columns", "widget", "emoji", "reaction", "link",
    "me", "myself", "test", "reset", "refinement", "refinements", "facet", "facets", "bookmark", "shortcut",
    "comparison", "compare",
    "suche", "auswahl", "filtre", "filtres", "recherche", "sélection", "filtro", "filtros", "filtri", "búsqueda",
    "ricerca", "pesquisa", "zoekopdracht", "фильтр", "фильтры", "поиск",
})
# the same, seen in the context (row, region, dialog) around a bare verb ("Remove" on a filter chip)
CONTEXT_BENIGN = frozenset({
    "filter", "filters", "search", "searches", "query", "tag", "tags", "chip", "chips", "keyword", "keywords",
    "selection", "sort", "refine", "refinements", "facet", "facets", "feedback",
})
# any verb is harmless in a sort or filter control ("Pay later" as a filter pill); a delete or send verb
# also in the other harmless surroundings ("Remove" on a recent search, "Send" in a feedback dialog)
FILTER_CONTEXT = frozenset({"filter", "filters", "sort", "refine", "refinements", "facet", "facets"})
_SOFTENED_BY_CONTEXT = frozenset({"delete", "send", "extra"})
# a submit button of a form with these names sends what was written ("Reply", "Comment")
SUBMIT_SENDS = frozenset({"reply", "comment", "respond", "post reply"})
# a name ending in one of these is a title ("Transfer history", "Order details", "Payment methods")
NOUN_HEADS = frozenset({
    "history", "details", "detail", "settings", "options", "status", "limits", "limit", "methods", "preferences",
    "summary", "overview", "center", "centre", "page", "pages", "info", "information", "activity", "records", "help",
    "faq", "faqs", "policy", "policies", "guide", "tips", "log", "logs", "report", "reports", "requests", "dashboard",
    "tab", "menu", "tools", "templates", "rules", "notifications", "calculator", "statements", "receipts", "options",
})
# the same heads in Chinese and Japanese, whose names have no spaces ("購入履歴", "支付方式"), as `tokens` splits them
CJK_NOUN_HEADS = ("履歴", "历史", "歷史", "记录", "記錄", "記録", "设置", "設定", "方式", "方法", "详情", "詳細", "明细",
                  "管理", "页面", "一覧", "列表", "状态", "状況", "確認画面")
# the harmless objects in Chinese and Japanese ("发送验证码": send a verification code; "删除筛选": remove a filter)
CJK_BENIGN = ("验证码", "驗證碼", "認証コード", "确认码", "校验码", "筛选", "篩選", "搜索", "搜尋", "检索", "フィルター",
              "検索", "删除线", "刪除線", "取り消し線")
_AFFIRMATIONS = frozenset({"yes", "ok", "okay", "sure", "i'm", "im", "i", "understand", "the", "consequences",
                           "permanently", "securely", "please", "now", "instantly", "also"})
_LEAD_INS = frozenset({"confirm", "agree", "accept", "continue", "save", "review", "book", "reserve", "submit",
                       "proceed", "go", "sign", "verify", "approve", "authorize", "authorise", "leave"})
_DETERMINERS = frozenset({"my", "your", "this", "the", "a", "an", "all", "selected", "our", "these", "those",
                          "of", "that", "its", "his", "her", "their"})
# a button that only says yes: a commitment when the dialog around it is about one
GENERIC_CONFIRMS = frozenset({
    "ok", "okay", "yes", "confirm", "continue", "proceed", "i'm sure", "yes i'm sure", "im sure", "yes im sure",
    "i understand", "agree", "i agree", "accept", "submit", "sure", "yes continue", "yes confirm", "do it", "go ahead",
    "yes proceed", "confirm and continue",
})
# what a dialog says when pressing its yes commits something
DIALOG_EVIDENCE = re.compile(
    r"\b(delet(e|es|ed|ing|ion)|remov(e|es|ed|ing|al)|purchas(e|ed|ing)|pay|paid|payment|charg(e|ed)|buy|"
    r"transfer(red)?|send|unsubscrib(e|ed)|cancellation|cancel (your |this |the |my )?(subscription|membership|plan|order|booking|reservation)|"
    r"close (your |this |my )?account|permanently|irreversibl[ey]|cannot be undone|can't be undone|withdraw(al)?|"
    r"donat(e|ion)|place (your |this )?order|erase|destroy|revok(e|ed))\b"
)
NEVER_ROLES = frozenset({
    "tab", "option", "checkbox", "radio", "switch", "combobox", "searchbox", "textbox", "slider", "spinbutton",
    "treeitem", "heading", "menuitemcheckbox", "menuitemradio", "columnheader", "rowheader", "row", "gridcell",
    "listbox", "tablist", "img", "label", "progressbar", "scrollbar", "separator", "tooltip",
})
NEVER_GROUPS = frozenset({"tablist", "listbox", "radiogroup", "tree", "menubar", "navigation", "search", "columnheader"})
BUTTON_ROLES = frozenset({"button", "menuitem", ""})
# a submit button of a payment form that does not submit the payment
FORM_NON_COMMIT = frozenset({"back", "previous", "cancel", "apply", "apply coupon", "apply code", "edit", "change",
                              "apply promo code", "apply discount", "redeem"})

_PRICE = re.compile(
    r"(?:[$€£¥₹]|\b(?:us\$|usd|eur|gbp|cad|aud|inr|jpy|chf|sek|nok|dkk)\s?)\s?\d[\d,]*(?:\.\d+)?"
    # a number only from the start of its run of digits, taken whole (possessive): linear in the text,
    # where trying every digit as a start backtracks in quadratic time on a long run
    r"|(?<![\d,])\d[\d,]*+(?:[.,]\d+)?\s?(?:[€£$]|\b(?:usd|eur|gbp|kr|zł|chf)\b)",
    re.I,
)
PAYMENT_FIELD = re.compile(
    r"card.?number|cardnumber|ccnum|cc.?num|credit.?card|debit.?card|\bcvc2?\b|\bcvv2?\b|\bcsc\b|card.?code|"
    r"card.?verification|security.?code|expir|exp.?date|exp.?month|exp.?year|\bmm\s*/\s*yy\b|name on card|cardholder",
    re.I,
)


_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])")


def tokens(text: str) -> list[str]:
    """Lower-case words of a name, in any script; prices become "<amount>", hyphenated words join ("pre-order" ->
    "preorder"); a Chinese or Japanese character is a word of its own (their names have no spaces)."""
    text = (text or "").lower().replace("\u2019", "'").replace("\u2018", "'")
    text = _PRICE.sub(" <amount> ", text)
    text = re.sub(r"(?<=[^\W\d_])-(?=[^\W\d_])", "", text)
    text = text.replace("&", " and ").replace("+", " and ")
    text = _CJK.sub(r" \1 ", text)
    text = re.sub(r"[^\w<>' ]+|_", " ", text)
    return [t.strip("'") for t in text.split() if t.strip("'")]


# a yes in the languages of FOREIGN: a commitment when the dialog around it is about one ("OK" under "确定删除吗?")
FOREIGN_CONFIRMS = ("ja", "bestätigen", "oui", "confirmer", "sí", "si", "confirmar", "conferma", "confermare", "sim",
                    "bevestigen", "да", "подтвердить", "确定", "確定", "确认", "確認", "はい", "是")
GENERIC_CONFIRMS = GENERIC_CONFIRMS | frozenset(" ".join(tokens(w)) for w in FOREIGN_CONFIRMS)
_FOREIGN_PHRASES = sorted(((tuple(tokens(p)), p) for p in FOREIGN), key=lambda pp: -len(pp[0]))


def foreign_evidence(text: str) -> Optional[str]:
    """The commitment verb of another language a dialog's text holds ("Möchten Sie die Datei wirklich löschen?",
    "确定要删除吗？"), or None."""
    words = tokens(text)
    return next((phrase for found, phrase in _FOREIGN_PHRASES if _contains(words, found)), None)


@dataclass(frozen=True)
class Vocabulary:
    """Commitment phrases and what makes them harmless. `extra` phrases commit
    like the built-in verbs; a name holding an `exempt` phrase never commits."""

    standalone: Mapping[str, str] = field(default_factory=lambda: dict(STANDALONE))
    needs_object: Mapping[str, tuple[str, frozenset[str]]] = field(default_factory=lambda: dict(NEEDS_OBJECT))
    extra: tuple[str, ...] = ()
    exempt: tuple[str, ...] = ()

    foreign: Mapping[str, str] = field(default_factory=lambda: dict(FOREIGN))

    def __post_init__(self) -> None:
        last = {" ".join(tokens(p)): c for p, c in self.foreign.items()}
        last.update({" ".join(tokens(p)): "extra" for p in self.extra if tokens(p)})
        phrases = {" ".join(tokens(p)): c for p, c in self.standalone.items()} | last
        object.__setattr__(self, "_phrases", sorted(((tuple(p.split()), c) for p in phrases for c in [phrases[p]]),
                                                    key=lambda pc: -len(pc[0])))
        # the phrases that also commit last in a name (or anywhere in a run of Chinese or Japanese characters)
        object.__setattr__(self, "_last", sorted(((tuple(p.split()), c) for p, c in last.items()), key=lambda pc: -len(pc[0])))
        object.__setattr__(self, "_exempt", [tuple(tokens(p)) for p in self.exempt if tokens(p)])

    def exempted(self, words: list[str]) -> bool:
        return any(_contains(words, phrase) for phrase in self._exempt)  # type: ignore[attr-defined]

    def commitment(self, name: str, context: str = "") -> Optional[str]:
        """The commitment an imperative name makes ("delete", "buy", ...), or None.
        `context` (the row, region or dialog around it) can make a bare verb harmless."""
        words = tokens(name)
        if not words or self.exempted(words):
            return None
        for start in _starts(words):
            found = self._match(words, start, context)
            if found is not None:
                return found or None
        found = self._match_last(words, context)
        if found is not None:
            return found or None
        if len(words) <= 4 and set(words) <= {"<amount>", "per", "mo", "month", "year", "yr", "week", "only", "total", "price"} \
                and "<amount>" in words:
            return "buy"  # a price alone on a button ("$4.99"): it buys
        return None

    def _match_last(self, words: list[str], context: str) -> Optional[str]:
        """A category for a phrase of another language or of the user's that ends the name ("Konto löschen") or
        stands in a run of Chinese or Japanese characters ("立即购买会员"); "" when its object or the context makes
        it harmless ("Filter löschen", "購入履歴"), None for none."""
        for phrase, category in self._last:  # type: ignore[attr-defined]
            n = len(phrase)
            unspaced = all(_CJK.fullmatch(w) for w in phrase)
            at = [i for i in range(len(words) - n + 1) if tuple(words[i: i + n]) == phrase]
            if at and (at[-1] == len(words) - n or unspaced):
                if set(words) & BENIGN_OBJECTS or _cjk_benign(words) or _cjk_title(words) or _softened(category, context):
                    return ""
                return category
        return None

    def _match(self, words: list[str], start: int, context: str) -> Optional[str]:
        """A category, "" for a phrase made harmless, None for no phrase at `start`."""
        rest = words[start:]
        for phrase, category in self._phrases:  # type: ignore[attr-defined]
            if tuple(rest[: len(phrase)]) == phrase:
                obj = rest[len(phrase):]
                if _harmless(obj, words) or _softened(category, context):
                    return ""
                return category
        verb = rest[0]
        if verb in self.needs_object:
            category, objects = self.needs_object[verb]
            following = []
            for w in rest[1:8]:
                if w in ("and", "or", "to", "with"):
                    break
                if w not in _DETERMINERS:
                    following.append(w)
            if set(following[:3]) & objects and words[-1] not in NOUN_HEADS and not _softened(category, context):
                return category
        if verb in _PRICE_VERBS and "<amount>" in rest[1:] and not set(context.lower().split()) & FILTER_CONTEXT:
            return "pay"
        if verb in ("subscribe", "upgrade", "renew") and len(rest) == 1 and _PRICE.search(context or ""):
            return "pay"  # "Subscribe" on a plan that says "$12/month"
        return None


def _starts(words: list[str]) -> list[int]:
    """Where an imperative may begin: at 0, after affirmations ("Yes, delete"),
    and after a lead-in joined by "and" or "to" ("Confirm and pay", "Proceed to pay")."""
    starts, i = [0], 0
    while i < len(words) and words[i] in _AFFIRMATIONS:
        i += 1
        starts.append(i)
    while i + 1 < len(words) and words[i] in _LEAD_INS and words[i + 1] in ("and", "to"):
        i += 2
        starts.append(i)
    return sorted({s for s in starts if s < len(words)})


def _contains(words: list[str], phrase: tuple[str, ...]) -> bool:
    n = len(phrase)
    return any(tuple(words[i: i + n]) == phrase for i in range(len(words) - n + 1))


def _harmless(obj: list[str], words: list[str]) -> bool:
    return bool(set(obj[:8]) & BENIGN_OBJECTS) or _cjk_benign(words) or (bool(obj) and (words[-1] in NOUN_HEADS or _cjk_title(words)))


def _cjk_benign(words: list[str]) -> bool:
    return any(_contains(words, tuple(phrase)) for phrase in CJK_BENIGN)


def _cjk_title(words: list[str]) -> bool:
    """A Chinese or Japanese name ending in a title's head ("購入履歴", "支付方式"), split into characters."""
    return any(tuple(words[-len(head):]) == tuple(head) for head in CJK_NOUN_HEADS)


def _softened(category: str, context: str) -> bool:
    around = set(tokens(context))
    return bool(around & FILTER_CONTEXT) or (category in _SOFTENED_BY_CONTEXT and bool(around & CONTEXT_BENIGN))


DEFAULT_VOCABULARY = Vocabulary()
# the default `sensitive_words` of agent/confirm.py before issue 22: covered by the vocabulary above
OLD_SENSITIVE_WORDS = ("buy", "pay", "purchase", "order", "delete", "remove", "transfer", "send", "checkout")
