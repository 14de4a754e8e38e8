"""surfer's own tabs in a browser context that is not surfer's: the user's own
browser reached over CDP (`--cdp-url` without a storage state), where the run
is a tab among the user's. What surfer adds to a page (its scripts, the
domain rules' routing, request counting for the settle wait) goes on its own
tabs only; the agent sees, switches to and closes only those; a tab one of
them opens is surfer's too; the user's tabs are left alone, before, during
and after the run. A mixin of `BrowserEnvironment` (session.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from surfer.tools.settle import MUTATION_TRACKER
from surfer.tools.typing import KEY_LISTENERS, STILL_CARET
from surfer.tools.widgets import widgets_script


def page_script() -> str:
    """What every page of a session runs first: one round trip; the key-listener tracker after widgets.js, whose
    key handling is ours."""
    return "\n;\n".join((MUTATION_TRACKER, widgets_script(), KEY_LISTENERS, STILL_CARET))


# Run before the page's scripts in a document that was loading before they were added: the page's key listeners
# added before them are not seen, so typing goes key by key there (typing.py), as for a page that listens.
LATE_SCRIPT = "window.__surferKeys = window.__surferKeys || { listening: true };\n"


class OwnTabs:
    """The tabs of a session that borrows a context (see the module's docstring)."""

    @property
    def _tabs(self) -> list[Any]:
        """The tabs the agent sees and may switch to or close: in a context that is not surfer's, only its own."""
        if self.borrows_context:
            return [page for page in self._own_pages if not page.is_closed()]
        return self._context.pages

    async def _new_tab(self) -> Any:
        """A new tab for the agent: in a borrowed context, one of surfer's own, ready before it loads anything."""
        page = await self._open_own_tab()
        if self.borrows_context:
            await page.set_viewport_size({"width": self.viewport[0], "height": self.viewport[1]})
            await self._adopt(page)
        return page

    async def _adopt(self, page: Any, loading: bool = False) -> None:
        """Make a tab of a borrowed context surfer's: its scripts, the domain rules, request counting, its popups.
        `loading`: a tab the page opened, whose first document began before the scripts were added: they are
        run in it too (typing there goes key by key, as the page's key listeners added before are not seen)."""
        if page not in self._own_pages:
            self._own_pages.append(page)
        page.set_default_navigation_timeout(self.navigation_timeout * 1000)
        page.on("popup", self._on_popup)
        self._tracker.attach(page)  # (other tabs' requests are not the run's)
        await page.add_init_script(page_script())
        if loading:
            from playwright.async_api import Error as PlaywrightError

            try:  # (a document that commits after add_init_script gets the scripts from it)
                await page.evaluate(LATE_SCRIPT + page_script())
            except PlaywrightError:
                pass  # navigated or closed meanwhile
        if self.url_policy.has_domain_rules:
            from .remote import RouteGuard

            await RouteGuard(self.url_policy.refusal, self.url_policy.on_refused_request).install(page)

    def _on_popup(self, page: Any) -> None:
        """A tab one of surfer's tabs opened: the agent's current tab, and surfer's (already loading: its
        scripts are run in the document it has); closed when the page opened it by itself (`may_open_tab`).
        Reported at once to the settle wait, which waits for the new tab a click opened."""
        if not self.may_open_tab(page):
            self._tab_report.arrived()
            return
        self._own_pages.append(page)
        self._tab_report.arrived()
        task = asyncio.ensure_future(self._adopt(page, loading=True))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # a popup that closed at once
        self._use(page)
