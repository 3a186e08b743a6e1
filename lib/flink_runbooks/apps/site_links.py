"""The built site's internal links, checked: every page and asset a page points to exists."""
from __future__ import annotations

import html.parser
import pathlib
import urllib.parse


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if value and (name == "src" or (name == "href" and tag in ("a", "link", "area"))):
                self.refs.append(value)


def _parse(path: pathlib.Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text())
    return parser


def broken_links(site: pathlib.Path) -> list[str]:
    """Relative links and resources of every page that point at no file (or no anchor) of the site."""
    site = site.resolve()
    parsed = {p: _parse(p) for p in sorted(site.rglob("*.html"))}
    broken = []
    for page, links in parsed.items():
        for ref in links.refs:
            url = urllib.parse.urlsplit(ref)
            if url.scheme or url.netloc or ref.startswith(("data:", "javascript:")):
                continue
            target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
            where = f"{page.relative_to(site)}: {ref}"
            if site not in target.parents and target != site:
                broken.append(f"{where} (outside the site)")
            elif target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{where} (no such file)")
            elif url.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if urllib.parse.unquote(url.fragment) not in ids:
                    broken.append(f"{where} (no anchor #{url.fragment})")
    return broken
