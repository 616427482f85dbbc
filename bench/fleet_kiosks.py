"""A fleet of kiosks on one machine: N kiosk processes answer questions in a loop while they
watch a bundle source served over HTTP on loopback; an administrator publishes new bundles.

    .venv/bin/python bench/fleet_kiosks.py --kiosks 20 --poll-s 10 --kills 10 --json out.json

Each kiosk is a headless process running the window's own code path: the AssistantController
and its AssistantWorker (the model in its child process, the store reopened between questions
when a switch happened) in a QCoreApplication, with the BundleWatcher made from its settings
file, exactly as the app starts it in kiosk mode. (A Qt-free loop over engine.answer.assistant
would test a copy of the reopen rule, not the one the kiosks run.)

Measured: the time from publishing to each kiosk's switch and to its first answer on the new
version, questions that failed meanwhile, bytes the server sent for a one-document change, a
tampered manifest refused by every kiosk, and kill -9 during download and during install
(each time a kiosk is restarted and must answer on an installed version).

The admin collection is a copy of --admin-data's (default /tmp/lead-data: the R manuals and
four other families) or, without it, the pump manual of the tests. The LLM is --llm (a prepared
model folder) or a tiny random one (answers are gibberish; switching does not depend on them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUESTIONS = ["How do I install a package?", "How do I read a data file?", "What does the error mean?",
             "How do I prime the pump before the first start?", "How do I close the strainer valve?"]


# -- one kiosk (a child process) ----------------------------------------------------------------
def kiosk_main(data: Path, log_path: Path, llm: Path, think_s: float) -> int:
    from PySide6.QtCore import QCoreApplication, QTimer

    from desktop_app.controllers.assistant import AssistantController
    from engine.answer.assistant import (
        AssistantSettings,
        DoneEvent,
        ErrorEvent,
        PassagesEvent,
    )
    from engine.config import load_settings
    from engine.fleet.watcher import watcher_from_settings
    from engine.paths import AppPaths

    app = QCoreApplication([])
    paths = AppPaths(data).ensure()
    settings = load_settings(paths.settings_file)
    out = open(log_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (open while the kiosk runs)

    def note(kind: str, **fields) -> None:
        out.write(json.dumps({"t": time.time(), "kind": kind, **fields}) + "\n")

    watcher = watcher_from_settings(paths, settings, on_result=lambda r: note(
        "poll", outcome=r.outcome, version=r.version, bytes=r.bytes_moved, detail=r.detail[:300]))
    controller = AssistantController(paths, provider="cpu", settings=settings, llm_folder=llm,
                                     assistant_settings=AssistantSettings(relevance_threshold=-10.0,
                                                                          max_new_tokens=16))
    state = {"n": 0, "versions": set()}

    def ask() -> None:
        state["n"] += 1
        state["versions"] = set()
        controller.ask(QUESTIONS[state["n"] % len(QUESTIONS)])

    def on_event(event) -> None:
        if isinstance(event, PassagesEvent):
            state["versions"] = {_version_of(p.path) for p in event.passages}
        elif isinstance(event, (DoneEvent, ErrorEvent)):
            versions = sorted(v for v in state["versions"] if v is not None)
            note("answer", ok=isinstance(event, DoneEvent), versions=versions,
                 error=getattr(event, "message", "") if isinstance(event, ErrorEvent) else "")
            QTimer.singleShot(int(think_s * 1000), ask)

    controller.answerEvent.connect(on_event)
    controller.modelReady.connect(lambda status: (note("ready"), QTimer.singleShot(0, ask)))
    signal.signal(signal.SIGTERM, lambda *_: app.quit())
    heartbeat = QTimer()  # lets Python run the SIGTERM handler while Qt waits
    heartbeat.start(200)
    heartbeat.timeout.connect(lambda: None)
    note("started", pid=os.getpid())
    watcher.start()
    try:
        return app.exec()
    finally:
        watcher.stop()
        controller.shutdown()


def _version_of(path: str) -> int | None:
    parts = Path(path).parts
    if "versions" in parts:
        tail = parts[parts.index("versions") + 1]
        return int(tail) if tail.isdigit() else None
    return None


# -- the administrator ----------------------------------------------------------------------------
class Admin:
    def __init__(self, work: Path, admin_data: Path | None):
        from engine.fleet.bundle import generate_keys, public_key_text
        from engine.paths import AppPaths

        self.paths = AppPaths(work / "admin").ensure()
        if admin_data and (admin_data / "collections" / "default").is_dir():
            shutil.rmtree(self.paths.collections / "default", ignore_errors=True)
            shutil.copytree(admin_data / "collections" / "default", self.paths.collections / "default",
                            ignore=shutil.ignore_patterns("writer.lock"))
        else:
            from tests.helpers.pump_chat import PUMP_PAGES

            pump = work / "pump.txt"
            pump.write_text("\n\n".join(PUMP_PAGES), encoding="utf-8")
            self.index([pump])
        self.key = generate_keys(work / "key.pem")
        self.public = public_key_text(self.key)
        self.source = work / "source"
        self.version = 0

    def index(self, files) -> None:
        from tests.helpers.pump_chat import index_into

        index_into(self.paths, files)

    def add_manual(self) -> None:
        """A one-document change: a short new manual."""
        manual = self.paths.root / f"note-{self.version + 1}.txt"
        manual.write_text(f"Service note {self.version + 1}. Close the strainer valve before removing "
                          f"the basket; torque the cover bolts to {20 + self.version} Nm.", encoding="utf-8")
        self.index([manual])

    def publish(self, tamper: bool = False) -> dict:
        """Builds the next version and publishes it: into a staging source with `admin bundle
        publish`, then onto the served one, latest.json last (with `tamper`, its manifest.json is
        changed by one byte after signing before any kiosk can see it)."""
        from engine.fleet.bundle import build_bundle, publish_bundle

        self.version += 1
        out = self.paths.root / f"bundle-{self.version}.tar"
        started = time.monotonic()
        manifest = build_bundle(self.paths, "default", self.key, out, version=self.version)
        staging = self.source.with_name("staging")
        publish_bundle(out, staging)
        out.unlink()
        (self.source / "objects").mkdir(parents=True, exist_ok=True)
        for item in (staging / "objects").iterdir():
            if not (self.source / "objects" / item.name).exists():
                shutil.copyfile(item, self.source / "objects" / f".{item.name}")
                os.replace(self.source / "objects" / f".{item.name}", self.source / "objects" / item.name)
        folder = f"bundles/{self.version}"
        shutil.copytree(staging / folder, self.source / folder)
        if tamper:  # one space more: the same JSON, other bytes than were signed
            target = self.source / folder / "manifest.json"
            target.write_bytes(target.read_bytes().replace(b'"size": ', b'"size":  ', 1))
        shutil.copyfile(staging / "latest.json", self.source / ".latest.json")
        os.replace(self.source / ".latest.json", self.source / "latest.json")
        return {"version": self.version, "bundle_bytes": manifest.total_bytes,
                "build_publish_s": round(time.monotonic() - started, 2), "manifest": manifest}


# -- the fleet --------------------------------------------------------------------------------
class Kiosk:
    def __init__(self, index: int, work: Path, url: str, key: str, poll_s: float, llm: Path, think_s: float):
        from engine.config import Settings, save_settings
        from engine.paths import AppPaths

        self.index = index
        self.paths = AppPaths(work / f"kiosk-{index:02d}").ensure()
        save_settings(self.paths.settings_file, Settings(kiosk=True, bundle_source=url, bundle_keys=(key,),
                                                         bundle_poll_s=poll_s, use_reranker=False))
        self.log = self.paths.root / "kiosk.jsonl"
        self.args = [sys.executable, __file__, "--kiosk", str(self.paths.root), "--log", str(self.log),
                     "--llm", str(llm), "--think-s", str(think_s)]
        self.process: subprocess.Popen | None = None
        self.read_at = 0

    def start(self) -> None:
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", OMP_NUM_THREADS="1")
        self.process = subprocess.Popen(self.args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                        stderr=open(self.paths.root / "stderr.txt", "ab"))  # noqa: SIM115

    def kill9(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()

    def records(self) -> list[dict]:
        try:
            lines = self.log.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip().endswith("}")]

    def current(self) -> int | None:
        return self.paths.fleet_current("default")


def wait_until(check, timeout_s: float, step_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(step_s)
    return None


def answered_on(kiosk: Kiosk, version: int, since: float) -> dict | None:
    return next((r for r in kiosk.records() if r["kind"] == "answer" and r["t"] >= since and r["ok"]
                 and r["versions"] == [version]), None)


def switch_round(kiosks, admin, poll_s) -> dict:
    """Publishes a one-document change and waits for every kiosk to answer on it."""
    admin.add_manual()
    published = admin.publish()
    version, t0 = published["version"], time.time()
    done = wait_until(lambda: all(answered_on(k, version, t0) for k in kiosks), poll_s * 3 + 120)
    switch, first, moved = [], [], []
    for k in kiosks:
        polls = [r for r in k.records() if r["kind"] == "poll" and r["t"] >= t0 and r["version"] == version
                 and r["outcome"] == "installed"]
        if polls:
            switch.append(polls[0]["t"] - t0)
            moved.append(polls[0]["bytes"])
        answer = answered_on(k, version, t0)
        if answer:
            first.append(answer["t"] - t0)
    end = time.time()
    answers = [r for k in kiosks for r in k.records() if r["kind"] == "answer" and t0 <= r["t"] <= end]
    held = {e.sha256 for e in admin.previous_manifest.objects().values()} if admin.previous_manifest else set()
    new = [e for sha, e in published["manifest"].objects().items() if sha not in held]
    admin.previous_manifest = published["manifest"]
    return {"version": version, "all_switched": bool(done), "switched": len(switch),
            "switch_s": _spread(switch), "first_answer_on_new_s": _spread(first),
            "answers_during": len(answers), "errors_during": sum(not r["ok"] for r in answers),
            "error_samples": [r["error"] for r in answers if not r["ok"]][:3],
            "bytes_moved_per_kiosk": _spread(moved), "bundle_bytes": published["bundle_bytes"],
            "new_objects": [(e.name, e.size) for e in new], "build_publish_s": published["build_publish_s"]}


def _spread(values) -> dict:
    if not values:
        return {}
    return {"median": round(statistics.median(values), 2), "max": round(max(values), 2),
            "min": round(min(values), 2)}


def tamper_round(kiosks, admin, poll_s) -> int:
    """Publishes a version whose manifest is changed after signing: how many kiosks refuse it."""
    admin.add_manual()
    t0 = time.time()
    version = admin.publish(tamper=True)["version"]

    def refused(k):
        return any(r["kind"] == "poll" and r["t"] >= t0 and r["outcome"] == "refused" for r in k.records())

    wait_until(lambda: all(refused(k) for k in kiosks), poll_s * 2 + 60)
    return sum(refused(k) and k.current() != version for k in kiosks)


def kill_round(targets: dict, admin, poll_s: float) -> list[dict]:
    """Publishes a change and kills each kiosk of `targets` ({"download": kiosk, "install": kiosk})
    with SIGKILL inside its window: while it downloads (a .part exists) or installs (an unpacking
    folder exists); restarts it, and checks that it answers on an installed version afterwards
    and then takes the new one."""
    admin.add_manual()
    before = {when: k.current() for when, k in targets.items()}
    version = admin.publish()["version"]

    def state(when: str, kiosk: Kiosk):
        if when == "download" and any(kiosk.paths.fleet_objects.glob("*.part")):
            return "hit"
        versions = kiosk.paths.fleet_collection("default") / "versions"
        if when == "install" and any(p.name.startswith(f".{version}-") for p in versions.glob(".*")):
            return "hit"
        return "missed" if kiosk.current() == version else None  # too quick to catch this time

    outcome, killed_at = {}, {}
    deadline = time.monotonic() + poll_s * 2 + 120
    while len(outcome) < len(targets) and time.monotonic() < deadline:
        for when, kiosk in targets.items():
            if when not in outcome and (seen := state(when, kiosk)):
                kiosk.kill9()
                outcome[when], killed_at[when] = seen, time.time()
                kiosk.start()
        time.sleep(0.002)
    rounds = []
    for when, kiosk in targets.items():
        since = killed_at.get(when, time.time())
        answered = wait_until(lambda: next((r for r in kiosk.records() if r["kind"] == "answer"  # noqa: B023
                                            and r["t"] >= since), None), 180)  # noqa: B023
        took = wait_until(lambda: answered_on(kiosk, version, since), poll_s * 2 + 120)  # noqa: B023
        working = bool(answered and answered["ok"] and answered["versions"]
                       and answered["versions"][0] in (before[when], version))
        rounds.append({"when": when, "kiosk": kiosk.index, "hit": outcome.get(when) == "hit",
                       "before": before[when], "working": working, "took_new": bool(took)})
    return rounds


def run_fleet(args) -> dict:
    from tests.helpers.static_server import static_server

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    llm = Path(args.llm) if args.llm else _tiny_llm(work)
    admin = Admin(work, Path(args.admin_data) if args.admin_data else None)
    first = admin.publish()
    admin.previous_manifest = first["manifest"]
    figures: dict = {"kiosks": args.kiosks, "poll_s": args.poll_s, "bundle_bytes_v1": first["bundle_bytes"]}
    with static_server(admin.source, ranges=True) as server:
        kiosks = [Kiosk(i, work, server.url, admin.public, args.poll_s, llm, args.think_s)
                  for i in range(args.kiosks)]
        try:
            for k in kiosks:
                k.start()
            t0 = time.time()
            ready = wait_until(lambda: all(answered_on(k, 1, 0) for k in kiosks), args.poll_s * 3 + 300)
            figures["start_all_answering_v1_s"] = round(time.time() - t0, 1) if ready else None
            figures["bytes_sent_initial"] = server.bytes_sent
            sent = server.bytes_sent
            figures["switch"] = switch_round(kiosks, admin, args.poll_s)
            figures["bytes_sent_switch"] = server.bytes_sent - sent
            figures["tampered_refused_by"] = tamper_round(kiosks, admin, args.poll_s)
            rounds = []
            for i in range(args.kills):  # each round: one kiosk killed downloading, another installing
                targets = {"download": kiosks[(2 * i) % len(kiosks)], "install": kiosks[(2 * i + 1) % len(kiosks)]}
                rounds += kill_round(targets, admin, args.poll_s)
            figures["kills"] = {}
            for when in ("download", "install"):
                mine = [r for r in rounds if r["when"] == when]
                figures["kills"][when] = {"runs": len(mine), "landed": sum(r["hit"] for r in mine),
                                          "working_after": sum(r["working"] for r in mine),
                                          "took_new_after": sum(r["took_new"] for r in mine),
                                          "rounds": mine}
            working = [k for k in kiosks if k.current() is not None and
                       (k.paths.collection("default") / "collection.sqlite3").is_file()]
            figures["on_a_working_version_at_end"] = len(working)
        finally:
            for k in kiosks:
                k.stop()
    switch = figures["switch"]
    figures["switched"] = switch["switched"]
    figures["errors_during_switch"] = switch["errors_during"]
    figures["switch_s_max"] = switch["switch_s"].get("max")
    figures["install_s_max"] = _install_max(kiosks)
    return figures


def _install_max(kiosks) -> float:
    """The longest install (unpack + switch) any kiosk's audit log recorded."""
    from engine.fleet.records import read_records

    seconds = [r.get("seconds", 0) for k in kiosks for r in read_records(k.paths) if r["action"] == "installed"]
    return round(max(seconds, default=0.0), 2)


def _tiny_llm(work: Path) -> Path:
    from engine.models.gguf_import import import_gguf
    from tests.helpers.gguf_factory import write_tiny_gguf

    folder = work / "tiny_llm"
    folder.mkdir()
    return import_gguf(write_tiny_gguf(folder / "tiny.gguf", context_length=2048, weight_type="Q4_1"),
                       folder / "model")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiosks", type=int, default=20)
    parser.add_argument("--poll-s", type=float, default=10.0)
    parser.add_argument("--kills", type=int, default=10, help="kill -9 rounds during download, and as many during install")
    parser.add_argument("--think-s", type=float, default=0.5, help="pause between two questions of a kiosk")
    parser.add_argument("--llm", help="a prepared model folder (default: a tiny random model)")
    parser.add_argument("--admin-data", default="/tmp/lead-data", help="a data dir whose 'default' collection is bundled")
    parser.add_argument("--work", default="/tmp/fleet-kiosks")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--kiosk", help=argparse.SUPPRESS)  # run as one kiosk (a child of the bench)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kiosk:
        return kiosk_main(Path(args.kiosk), Path(args.log), Path(args.llm), args.think_s)
    figures = run_fleet(args)
    text = json.dumps(figures, indent=1, default=str)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
