"""Fixtures shared by the whole test suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a database on a throwaway PostgreSQL server started for this test session
    (tests/_postgres.py); skips when Debian's postgresql package is not installed."""
    from tests._postgres import Unavailable, postgres_server

    try:
        server = postgres_server()
        url = server.__enter__()
    except Unavailable as exc:
        pytest.skip(str(exc))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield url
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def pg_url(postgres_url: str) -> Iterator[str]:
    """A fresh, empty database on the session's server."""
    pytest.importorskip("psycopg")
    from tests._postgres import fresh_database

    with fresh_database(postgres_url) as url:
        yield url
