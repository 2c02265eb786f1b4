"""The tuning database: every trial of every workload, recorded the moment it ends.

SQLite by default (one file, safe for several processes writing at once), any server SQLAlchemy
speaks to by URL (PostgreSQL through psycopg 3). The schema is versioned; older databases are
migrated on open, newer ones are refused with a message saying to upgrade tunex. Every entry
point (the ``tunex`` commands, ``@tunex.autotune``, the library launchers) uses
:func:`default_path` when no database is named: ``$TUNEX_DB``, else ``~/.cache/tunex/tunex.db``.

::

    from tunex.db import Database

    with Database("tunex.db") as db:
        number = db.record(workload, measurement, strategy="tpe")
        best = db.best(workload)
        trials = to_dataframe(db)  # pandas, one row per trial

Beside the trials it keeps what ``@tunex.autotune`` decided for each workload it met, and where
from (:meth:`Database.decisions`, :func:`decisions_dataframe`).
"""

from __future__ import annotations

from tunex.db._database import EXPORT_FORMATS, Database, Trial
from tunex.db._default import default_path
from tunex.db._frames import (
    decisions_dataframe,
    find_workloads,
    problem_label,
    target_label,
    to_dataframe,
)
from tunex.db._records import Decision
from tunex.db._schema import SCHEMA_VERSION
from tunex.db.packs import (
    PACK_FORMAT,
    PACK_SCHEMA,
    Pack,
    PackEntry,
    PackMatch,
    export_pack,
    import_pack,
    load_pack,
)

__all__ = [
    "EXPORT_FORMATS", "PACK_FORMAT", "PACK_SCHEMA", "SCHEMA_VERSION", "Database", "Decision",
    "Pack", "PackEntry", "PackMatch", "Trial", "decisions_dataframe", "default_path",
    "export_pack", "find_workloads", "import_pack", "load_pack", "problem_label",
    "target_label", "to_dataframe",
]
