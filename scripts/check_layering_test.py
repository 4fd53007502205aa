#!/usr/bin/env python3
"""Tests of scripts/check-layering against the fixture crates in scripts/testdata/layering/
(one tiny crate per case) and against crates written to a temporary directory (the long files).

Run by ./scripts/test beside the layering check: python3 -B scripts/check_layering_test.py
"""
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "check-layering")
FIXTURES = os.path.join(HERE, "testdata", "layering")

sys.dont_write_bytecode = True
_loader = importlib.machinery.SourceFileLoader("check_layering", SCRIPT)
_spec = importlib.util.spec_from_loader("check_layering", _loader)
layering = importlib.util.module_from_spec(_spec)
_loader.exec_module(layering)


# Every root the tests write, removed at exit.
_TMP = tempfile.TemporaryDirectory(prefix="layering-")


def fixture_root(*crates):
    """A temporary root holding copies of the named fixture crates."""
    root = tempfile.mkdtemp(dir=_TMP.name)
    for c in crates:
        shutil.copytree(os.path.join(FIXTURES, c), os.path.join(root, c))
    return root


def cycles(root):
    """{crate: [sorted module names of each cycle]} under `root`."""
    out = {}
    for f in layering.check(root).cycles:
        out.setdefault(f.crate, []).append(["::".join(m) or "crate" for m in f.modules])
    return out


class Tokens(unittest.TestCase):
    def test_braces_in_literals_and_comments_are_not_code(self):
        text = (
            "a /* x /* } */ } */ \"}\\\"}\" r#\"}\"# '}' b'{' br\"{\" 'a: loop {} // }\n"
            "'\\u{7d}' &'static str"
        )
        toks = [t.text for t in layering.tokenize(text) if t.kind != "lit"]
        self.assertEqual(toks, ["a", "'a", ":", "loop", "{", "}", "&", "'static", "str"])

    def test_lines(self):
        toks = layering.tokenize('a\n"x\ny"\n/*\n*/ b')
        self.assertEqual([(t.text, t.line) for t in toks][-1], ("b", 5))


class UseTrees(unittest.TestCase):
    def leaves(self, text):
        toks = layering.tokenize(text)
        leaves, _ = layering.parse_use(toks, 1)
        return [("::".join(s), n, g) for s, n, g, _ in leaves]

    def test_nested_groups(self):
        self.assertEqual(
            self.leaves("use crate::{a::{b, c::D as E, self}, f::*, g};"),
            [
                ("crate::a::b", "b", False),
                ("crate::a::c::D", "E", False),
                ("crate::a", "a", False),
                ("crate::f", None, True),
                ("crate::g", "g", False),
            ],
        )

    def test_super_group_with_self(self):
        self.assertEqual(
            self.leaves("use super::{self as outer, Config};"),
            [("super", "outer", False), ("super::Config", "Config", False)],
        )


class Cycles(unittest.TestCase):
    def test_production_code_after_a_test_module_counts(self):
        self.assertEqual(cycles(fixture_root("midfile")), {"midfile": [["a", "b"]]})

    def test_test_items_and_test_files_do_not_count(self):
        root = fixture_root("testonly")
        report = layering.check(root)
        self.assertEqual(report.cycles, [])
        (_, target), = report.targets
        self.assertEqual(sorted("::".join(m) for m in target.modules), ["", "a", "b"])
        tests = sorted(os.path.relpath(f, root) for f in target.test_files)
        self.assertEqual(tests, ["testonly/src/b/tests.rs", "testonly/src/b_more_tests.rs"])

    def test_nested_use_group(self):
        self.assertEqual(cycles(fixture_root("nested")), {"nested": [["p::q", "s"]]})

    def test_group_under_a_prefix_names_the_defining_module(self):
        self.assertEqual(
            cycles(fixture_root("group")), {"group": [["policies::stored", "resource"]]}
        )

    def test_reexport_is_followed_to_the_defining_module(self):
        root = fixture_root("reexport")
        self.assertEqual(cycles(root), {"reexport": [["meta", "resource", "user"]]})
        report = layering.check(root)
        (_, target), = report.targets
        # `user` names `resource` (as written) and `meta` (where `Meta` is defined).
        self.assertEqual(set(target.edges()[("user",)]), {("resource",), ("meta",)})
        (finding,) = report.cycles
        self.assertIn([("meta",), ("user",), ("meta",)], finding.cycles)

    def test_bare_child_path_and_super_group(self):
        self.assertEqual(
            cycles(fixture_root("children")), {"children": [["outer", "outer::inner"]]}
        )

    def test_report_names_file_line_and_path(self):
        root = fixture_root("midfile")
        run = subprocess.run(
            [sys.executable, "-B", SCRIPT, root], capture_output=True, text=True, check=False
        )
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        self.assertIn("midfile: module cycle between a, b", run.stdout)
        self.assertIn("cycle: a -> b -> a", run.stdout)
        self.assertIn("a -> b: midfile/src/a.rs:2 `crate::b::B`", run.stdout)
        self.assertIn("b -> a: midfile/src/b.rs:18 `crate::a::A`", run.stdout)

    def test_a_use_leaf_is_reported_at_its_own_line(self):
        (_, target), = layering.check(fixture_root("nested")).targets
        (site,) = target.edges()[("s",)][("p", "q")]
        self.assertEqual((os.path.basename(site.file), site.line), ("s.rs", 3))

    def test_clean_root_passes(self):
        env = dict(os.environ, UMBRA_LAYERING_ROOT=fixture_root("testonly"))
        run = subprocess.run(
            [sys.executable, "-B", SCRIPT], capture_output=True, text=True, env=env, check=False
        )
        self.assertEqual(run.returncode, 0, run.stdout)


class LongFiles(unittest.TestCase):
    """Files written here: 800-odd generated lines are clearer as a loop than as a fixture."""

    def write(self, root, rel, text):
        path = os.path.join(root, "long", rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    def test_only_production_lines_count(self):
        root = tempfile.mkdtemp(dir=_TMP.name)
        self.write(root, "Cargo.toml", '[package]\nname = "long"\n')
        self.write(root, "src/lib.rs", "//! Two modules.\npub mod fine;\npub mod over;\n")
        fns = lambda n, p: "".join(f"pub fn {p}{i}() {{}}\n" for i in range(n))
        tests = "#[cfg(test)]\nmod tests {\n" + fns(300, "t") + "}\n"
        # 500 + 300 production lines around a 302-line test module and a test file.
        self.write(
            root,
            "src/fine.rs",
            fns(500, "a") + tests + "#[cfg(test)]\nmod more;\n" + fns(300, "b"),
        )
        self.write(root, "src/fine/more.rs", fns(900, "m"))
        # 801 production lines, after the test module.
        self.write(root, "src/over.rs", tests + fns(801, "c"))
        report = layering.check(root)
        self.assertEqual(report.long_files, [(os.path.join("long", "src", "over.rs"), 801)])
        (_, target), = report.targets
        self.assertEqual(target.files[os.path.join(root, "long", "src", "fine.rs")], 800)


if __name__ == "__main__":
    unittest.main()
