"""Shipping odradek to Spark executors that do not have it installed.

On ``local[*]`` the executors are this machine's Python and import odradek as the driver
does. On a cluster (``spark://…``) they may not: ``ship_odradek`` zips the ``odradek`` and
``pyspark_odradek`` sources and adds the zip to every executor's Python path
(``SparkContext.addPyFile``), as ``spark-submit --py-files`` would. Their third-party
dependencies (pyarrow, crc32c, cramjam…) must be installed where the executors run
(``spark.pyspark.python`` pointing at a venv with ``odradek[spark]``'s dependencies).
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path


def odradek_zip(target_dir: str | os.PathLike) -> Path:
    """A zip of the ``odradek`` and ``pyspark_odradek`` packages (sources only), for ``addPyFile``."""
    import importlib.util

    spark_side = importlib.util.find_spec("pyspark_odradek")
    roots = [Path(__file__).resolve().parents[1]]  # the odradek package itself
    if spark_side is not None and spark_side.origin:
        roots.append(Path(spark_side.origin).parent)
    target = Path(target_dir) / "odradek-for-executors.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for root in roots:
            for path in root.rglob("*"):
                if path.is_file() and "__pycache__" not in path.parts:
                    zf.write(path, Path(root.name) / path.relative_to(root))
    return target


def ship_odradek(spark, work_dir: str | os.PathLike | None = None) -> Path:
    """Send odradek to the executors of ``spark`` as a zip on their Python path; the zip's path."""
    folder = Path(work_dir or tempfile.mkdtemp(prefix="odradek-ship-"))
    folder.mkdir(parents=True, exist_ok=True)
    zipped = odradek_zip(folder)
    spark.sparkContext.addPyFile(str(zipped))
    return zipped
