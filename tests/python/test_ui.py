"""The web view of `steady up`, in a real browser (Debian's headless chromium through
chromium-driver): log in with the printed one-time link, apply a Cache with 2 replicas with
kubectl, see both pods on the page, delete one from the page, and see a reconcile whose
trigger is that pod recreate a pod of the same name — all read from the rendered page.
Without the login cookie, the view answers 401.

Skipped only when chromium or chromedriver is missing outside CI; with CI=true it fails.
Set STEADY_UI_SCREENSHOT=path to save a screenshot of the final page (docs/ui.png).
"""

import os
import re
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import _stop, launch

UP_RE = re.compile(r"control plane listening on (https://\S+)")
LOGIN_RE = re.compile(r"web view \(log in once with this link\): (https://\S+)")
WAIT = 60

CACHE = """
apiVersion: steady.dev/v1alpha1
kind: Cache
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
"""


def browser_tools():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", chromium), ("chromedriver", driver)) if not path]
    if missing:
        reason = f"{' and '.join(missing)} not installed (apt-get install chromium chromium-driver)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the browser test: {reason}", pytrace=False)
        pytest.skip(reason)
    return chromium, driver


@pytest.fixture(scope="module")
def steady_up(tmp_path_factory):
    base = tmp_path_factory.mktemp("steady-up")
    kubeconfig = base / "kubeconfig"
    proc, found, log, log_path = launch(
        base,
        ["up", "--data-dir", str(base / "data"), "--listen", "127.0.0.1:0",
         "--write-kubeconfig", str(kubeconfig)],
        {"url": UP_RE, "login": LOGIN_RE},
    )
    try:
        yield found["url"], found["login"], kubeconfig, log_path
    finally:
        _stop(proc)
        log.close()


@pytest.fixture
def browser():
    chromium, driver_path = browser_tools()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--ignore-certificate-errors", "--window-size=1400,1100"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def status_without_cookie(url):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=context, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def eventually(what, check, timeout=WAIT):
    """Poll `check` (which may raise while the page redraws) until it returns a truthy value."""
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except StaleElementReferenceException as e:
            last = e
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what} ({last!r})", pytrace=False)


def pod_row(driver, name):
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, f'tr.owned[data-kind="Pod"][data-name="{name}"]')
    return rows[0] if rows else None


def reconciles(driver, key):
    """(id, triggers text, writes text) of each reconcile row of `key` on the page, read in
    one script run: the page redraws as records arrive, and a redraw cannot interleave with
    a script (reading row by row through WebDriver could meet a row already replaced)."""
    rows = driver.execute_script(
        """
        const section = Array.from(document.querySelectorAll('section.primary'))
            .find(s => s.dataset.key === arguments[0]);
        if (!section) return [];
        return Array.from(section.querySelectorAll('tr.reconcile')).map(r => [
            r.dataset.id,
            r.querySelector('td.triggers').innerText,
            r.querySelector('td.writes').innerText,
        ]);
        """,
        key,
    )
    return [(int(id), triggers, writes) for id, triggers, writes in rows]


def test_the_view_shows_the_loop_and_deletes_a_pod(steady_up, browser):
    from selenium.webdriver.common.by import By

    url, login, kubeconfig, log_path = steady_up
    for path in ("/ui/", "/ui/api/events"):
        assert status_without_cookie(url + path) == 401, path

    browser.get(login)
    eventually("the live badge", lambda: browser.find_element(By.ID, "connection").text == "live")

    subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", "-"],
                   input=CACHE.encode(), check=True, capture_output=True, timeout=60)
    for name in ("web-0", "web-1"):
        eventually(f"pod {name} on the page", lambda name=name: pod_row(browser, name))
    eventually("both pods Running", lambda: all(
        "Running" in pod_row(browser, n).text for n in ("web-0", "web-1")))

    before = max(id for id, _, _ in reconciles(browser, "default/web"))

    def click_delete():
        pod_row(browser, "web-1").find_element(By.CSS_SELECTOR, "button.delete").click()
        return True

    eventually("the delete button", click_delete)

    def recreated():
        return [r for r in reconciles(browser, "default/web")
                if r[0] > before and "owned Pod default/web-1" in r[1] and "created pod web-1" in r[2]]

    eventually("a reconcile triggered by pod web-1 that recreates it", recreated)
    eventually("pod web-1 back and Running", lambda: pod_row(browser, "web-1") is not None
               and "Running" in pod_row(browser, "web-1").text
               and "terminating" not in pod_row(browser, "web-1").text)

    shot = os.environ.get("STEADY_UI_SCREENSHOT")
    if shot:
        browser.save_screenshot(shot)


def test_operator_serves_the_view_on_its_own_address(tmp_path):
    """`steady operator --ui ADDR` against a cluster: the same view on its own HTTPS
    address, 401 without the cookie, and after the printed login link a feed that opens
    with a snapshot of the running controller."""
    import http.cookiejar

    server_proc, server, server_log, _ = launch(
        tmp_path, ["server", "--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0",
                   "--write-kubeconfig", str(tmp_path / "kubeconfig")],
        {"url": re.compile(r"steady server listening on (https://\S+)")})
    operator_dir = tmp_path / "operator"
    operator_dir.mkdir()
    try:
        proc, found, log, _ = launch(
            operator_dir, ["operator", "--kubeconfig", str(tmp_path / "kubeconfig"),
                           "--metrics-addr", "127.0.0.1:0", "--ui", "127.0.0.1:0"],
            {"login": LOGIN_RE})
        try:
            login = found["login"]
            base = login.split("/ui/")[0]
            assert status_without_cookie(base + "/ui/api/events") == 401
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            opener = urllib.request.build_opener(
                urllib.request.HTTPSHandler(context=context),
                urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
            with opener.open(login, timeout=10) as page:
                assert page.status == 200
            with opener.open(base + "/ui/api/events", timeout=10) as feed:
                received = b""
                # The snapshot comes first; the controller may start just after it.
                while b'"name":"cache"' not in received:
                    chunk = feed.read1(65536)
                    assert chunk, f"the feed ended: {received[:400]!r}"
                    received += chunk
            assert received.startswith(b"event: snapshot"), received[:200]
        finally:
            _stop(proc)
            log.close()
    finally:
        _stop(server_proc)
        server_log.close()
