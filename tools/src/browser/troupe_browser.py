"""troupe's browser helpers, imported into every browser_exec program.

Each helper is one request to troupe over the call's private socket
($TROUPE_BROWSER_SOCKET); troupe drives the browser and answers. The
browser, its current tab and the workspace ($BH_AGENT_WORKSPACE) last
across calls; this program's variables do not. Standard library only.
"""

import json
import os
import socket

__all__ = [
    "BrowserError",
    "new_tab",
    "goto_url",
    "wait_for_load",
    "page_info",
    "js",
    "fill_input",
    "click_at_xy",
    "capture_screenshot",
    "cdp",
    "ensure_real_tab",
    "WORKSPACE",
]

WORKSPACE = os.environ.get("BH_AGENT_WORKSPACE", ".")


class BrowserError(Exception):
    """A helper failed; the message says why and what to do."""


_conn = None


def _request(helper, **args):
    global _conn
    if _conn is None:
        _conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _conn.connect(os.environ["TROUPE_BROWSER_SOCKET"])
        _conn = _conn.makefile("rwb")
    line = json.dumps({"helper": helper, "args": args}) + "\n"
    _conn.write(line.encode())
    _conn.flush()
    answer = _conn.readline()
    if not answer:
        raise BrowserError("troupe closed the browser connection (the call was stopped)")
    answer = json.loads(answer)
    if "error" in answer:
        raise BrowserError(answer["error"])
    return answer.get("ok")


def new_tab(url=None):
    """Opens a new tab (at `url` if given) and makes it the current one."""
    return _request("new_tab", url=url) if url else _request("new_tab")


def goto_url(url):
    """Opens `url` in the current tab, waits for it to load; returns page_info()."""
    return _request("goto_url", url=url)


def wait_for_load(timeout=15):
    """Waits until the current page has loaded; False when `timeout` s ran out."""
    return _request("wait_for_load", timeout=timeout)


def page_info():
    """The current page: url, title, viewport w/h, scroll sx/sy, page pw/ph."""
    return _request("page_info")


def js(expression):
    """Evaluates JavaScript in the page (promises awaited); returns its JSON value."""
    return _request("js", expression=expression)


def fill_input(selector, text):
    """Types `text` into the element the CSS `selector` finds, replacing its value."""
    return _request("fill_input", selector=selector, text=text)


def click_at_xy(x, y, clicks=1):
    """Clicks at viewport coordinates (x, y)."""
    return _request("click_at_xy", x=x, y=y, clicks=clicks)


def capture_screenshot(path=None):
    """Saves a PNG of the page in the workspace; returns its path (print it to see it)."""
    return _request("capture_screenshot", path=path) if path else _request("capture_screenshot")


def cdp(method, params=None, browser=False):
    """A raw DevTools command to the current tab (the browser with browser=True)."""
    return _request("cdp", method=method, params=params or {}, browser=browser)


def ensure_real_tab():
    """Makes sure the current tab is a real page; returns its target_id, url, title."""
    return _request("ensure_real_tab")
