"""The README's quick starts, run as written (issue 40): every fenced block
marked `<!-- readme-test ... -->` runs against a real dpcurator-server over
TLS on generated data, so the README cannot drift from the CLI.

What the harness supplies, and nothing else:
  * the files a reader brings: patients.csv (a generated table), survey.json
    and my_rows.csv (a device's rows), a token file, a CA and a server
    certificate (cert.pem, key.pem, ca.pem);
  * the server's address: the README's `dpcurator-server ...` line runs in
    the background with a free loopback port added, and every
    `DPCURATOR_SERVER=...` value is replaced by that address;
  * `<curator token>`, `<analyst token>`, `<device token>` placeholders, and
    `col_...` by the id the collection's create printed;
  * the one step a person does by hand: "now edit patients.schema.json"
    removes the draft's "data_derived" markers (as a steward who checked the
    values against a codebook would).
Blocks run in order, shell lines one by one (exports carry over), Python
blocks with the built module; a failing line fails the test with its
output."""

import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import server_harness

SOURCE_DIR = os.environ.get("DPC_SOURCE_DIR", "")
TOKENS = {"curator": "readme-curator-token", "analyst": "readme-analyst-token",
          "device": "readme-device-token"}
MARKER = "<!-- readme-test"


def readme_blocks(path):
    """(language, text) of every fenced block right after a marker line."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].startswith(MARKER):
            fence = lines[i + 1]
            if not fence.startswith("```"):
                raise AssertionError(f"README line {i + 2}: a readme-test marker must be "
                                     "followed by a fenced block")
            language = fence[3:].strip()
            j = i + 2
            while not lines[j].startswith("```"):
                j += 1
            blocks.append((language, "\n".join(lines[i + 2:j])))
            i = j
        i += 1
    return blocks


def shell_commands(text):
    """Commands of a shell block: comments dropped, continuations joined."""
    commands, current = [], ""
    for line in text.split("\n"):
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            if stripped.startswith("# now edit"):
                commands.append(stripped)
            continue
        code = re.sub(r"\s+#.*$", "", line) if "#" in line and not current else line
        if code.rstrip().endswith("\\"):
            current += code.rstrip()[:-1] + " "
            continue
        commands.append((current + code).strip())
        current = ""
    return commands


def write_fixtures(directory):
    rng = random.Random(40)
    with open(os.path.join(directory, "patients.csv"), "w") as f:
        f.write("age,income,region,smoker,visits,outcome\n")
        for _ in range(1500):
            age = rng.randint(18, 90)
            income = round(math.exp(rng.gauss(10.0, 0.8)), 2)
            region = rng.choice(["north", "south", "east", "west"])
            smoker = rng.choice(["yes", "no"])
            visits = min(20, int(rng.expovariate(0.3)))
            score = 0.05 * (age - 50) + (1.2 if smoker == "yes" else 0.0) + 0.1 * visits - 0.8
            outcome = "ill" if rng.random() < 1.0 / (1.0 + math.exp(-score)) else "well"
            f.write(f"{age},{income},{region},{smoker},{visits},{outcome}\n")
    with open(os.path.join(directory, "survey.json"), "w") as f:
        json.dump({"columns": [
            {"name": "sleep_hours", "type": "NUMERIC", "lower": 0, "upper": 12},
            {"name": "steps_k", "type": "NUMERIC", "lower": 0, "upper": 30}]}, f)
    with open(os.path.join(directory, "my_rows.csv"), "w") as f:
        f.write("sleep_hours,steps_k\n")
        for _ in range(50):
            f.write(f"{rng.uniform(4, 10):.2f},{rng.uniform(0, 20):.2f}\n")
    with open(os.path.join(directory, "tokens.txt"), "w") as f:
        for role, token in TOKENS.items():
            f.write(f"{role} {token}\n")
    server_harness.make_certificates(directory)
    shutil.copy(os.path.join(directory, "server.pem"), os.path.join(directory, "cert.pem"))
    shutil.copy(os.path.join(directory, "server.key"), os.path.join(directory, "key.pem"))


class ReadmeTest(unittest.TestCase):
    def setUp(self):
        if not server_harness.SERVER or not server_harness.CLI or not SOURCE_DIR:
            self.fail("DPC_SERVER, DPC_CLI and DPC_SOURCE_DIR must be set (ctest sets them)")
        self.directory = tempfile.mkdtemp(prefix="dpc_readme_test_")
        write_fixtures(self.directory)
        bin_dirs = [os.path.dirname(server_harness.CLI), os.path.dirname(server_harness.SERVER)]
        self.env = dict(os.environ)
        self.env["PATH"] = os.pathsep.join(bin_dirs + [self.env.get("PATH", "")])
        for name in list(self.env):
            if name.startswith("DPCURATOR_"):
                del self.env[name]
        self.server = None
        self.address = None
        self.collection = None

    def tearDown(self):
        if self.server is not None and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.server.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def start_server(self, command):
        port_file = os.path.join(self.directory, "port")
        with open(os.path.join(self.directory, "server.log"), "w") as log:
            self.server = subprocess.Popen(
                command + f" --listen=127.0.0.1:0 --port_file={port_file}", shell=True,
                cwd=self.directory, env=self.env, stdout=log, stderr=log,
                executable="/bin/bash")
        for _ in range(600):
            try:
                with open(port_file) as f:
                    port = int(f.read().strip() or 0)
                if port > 0:
                    self.address = f"localhost:{port}"
                    return
            except (OSError, ValueError):
                pass
            if self.server.poll() is not None:
                with open(os.path.join(self.directory, "server.log")) as f:
                    self.fail("the README's server line exited: " + f.read())
            time.sleep(0.05)
        self.fail("the README's server line did not start listening")

    def substitute(self, command):
        for role, token in TOKENS.items():
            command = command.replace(f"<{role} token>", token)
        if self.address is not None:
            command = re.sub(r"DPCURATOR_SERVER=\S+", f"DPCURATOR_SERVER={self.address}",
                             command)
        if self.collection is not None:
            command = command.replace("col_...", self.collection)
        return command

    def run_shell(self, command):
        if command.startswith("# now edit"):
            path = os.path.join(self.directory, "patients.schema.json")
            with open(path) as f:
                schema = json.load(f)
            for column in schema["columns"]:
                column.pop("data_derived", None)
            with open(path, "w") as f:
                json.dump(schema, f, indent=2)
            return
        command = self.substitute(command)
        if command.startswith("dpcurator-server "):
            self.start_server(command)
            return
        if command.startswith("export "):
            for assignment in command[len("export "):].split():
                name, _, value = assignment.partition("=")
                self.env[name] = value
            return
        result = subprocess.run(command, shell=True, cwd=self.directory, env=self.env,
                                capture_output=True, text=True, executable="/bin/bash",
                                timeout=600)
        self.assertEqual(result.returncode, 0,
                         f"README command failed: {command}\nstdout:\n{result.stdout}\n"
                         f"stderr:\n{result.stderr}")
        found = re.search(r"\bcol_[0-9A-Za-z]+", result.stdout + result.stderr)
        if found and self.collection is None:
            self.collection = found.group(0)
        return result

    def test_every_marked_block_runs_as_written(self):
        blocks = readme_blocks(os.path.join(SOURCE_DIR, "README.md"))
        languages = [language for language, _ in blocks]
        # The curator's, analyst's (shell and Python) and devices' quick starts.
        self.assertGreaterEqual(languages.count("sh"), 3, languages)
        self.assertIn("python", languages)
        ran = []
        for language, text in blocks:
            if language == "python":
                env = dict(self.env)
                env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
                result = subprocess.run([sys.executable, "-c", text], cwd=self.directory, env=env,
                                        capture_output=True, text=True, timeout=600)
                self.assertEqual(result.returncode, 0, f"README Python block failed:\n{text}\n"
                                 f"{result.stderr}")
                ran.append("python")
                continue
            for command in shell_commands(text):
                self.run_shell(command)
                ran.append(command.split()[0] if command.split() else command)
        # What the blocks made is what a reader would look for next.
        for name in ["aim.model", "mst.model", "merf.model", "pearl.model", "synthetic.csv",
                     "report.html", "survey.model"]:
            self.assertTrue(os.path.getsize(os.path.join(self.directory, name)) > 0, name)
        with open(os.path.join(self.directory, "synthetic.csv")) as f:
            self.assertEqual(sum(1 for _ in f), 10001)


if __name__ == "__main__":
    unittest.main()
