"""Checks on a written page without a browser: what it would load, and its visible text."""

from __future__ import annotations

from html.parser import HTMLParser


class PageScan(HTMLParser):
    """Every external reference (src, href other than a #fragment), every script's kind, the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.references: list[str] = []
        self.scripts: list[str] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        for name in ("src", "href"):
            value = values.get(name)
            if value is not None and not value.startswith("#"):
                self.references.append(f"{tag} {name}={value}")
        if tag == "script":
            self.scripts.append(values.get("type") or "text/javascript")
            self._in_script = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if not self._in_script:
            self.text.append(data)


def scan(html: str) -> PageScan:
    page = PageScan()
    page.feed(html)
    page.close()
    return page
