"""Every ``rlvr`` subcommand's ``--help`` is plain text: no reStructuredText left from the docstrings (issue: ``rlvr
judge --help`` showed raw reST; click cuts a docstring at ``\\f``, so the reST part stays for the API reference)."""

from __future__ import annotations

import re

import click
import pytest
from click.testing import CliRunner

from rlvr.cli import main

REST = re.compile(r"``|:(func|mod|class|meth|attr|data|exc):`")


@pytest.mark.parametrize("name", main.list_commands(click.Context(main)))
def test_help_has_no_rest_markup(name):
    r = CliRunner().invoke(main, [name, "--help"])
    assert r.exit_code == 0, r.output
    assert not REST.search(r.output), f"rlvr {name} --help: {REST.search(r.output).group(0)!r} in\n{r.output}"
