"""The --help of the program and of every subcommand is plain text: no reST markup (double or single
backticks) from the docstrings the descriptions are built from."""
import argparse

import pytest

from app.cli import build_parser


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_is_covered():
    assert {"run", "prove", "evaluate", "table1", "sweep", "scope"} <= set(_subparsers())


def test_the_program_help_is_plain_text():
    assert "`" not in build_parser().format_help()


@pytest.mark.parametrize("name", sorted(_subparsers()))
def test_a_command_help_is_plain_text(name):
    text = _subparsers()[name].format_help()
    assert "``" not in text, f"{name} --help shows reST double backticks"
    assert "`" not in text, f"{name} --help shows a backtick"
