"""Ready Streams apps, run by ``odradek pipeline run NAME`` too (``pipeline/pipelines/__init__.py``
names them by module path, so the pipeline layer does not import streams)."""
