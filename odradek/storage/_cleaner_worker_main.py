"""Entry point of the cleaner's worker process: ``python -m odradek.storage._cleaner_worker_main
READ_FD WRITE_FD`` (see ``cleaner_worker``). A module of its own so that ``-m`` does not run a
module the package has already imported."""

import sys

from odradek.storage.cleaner_worker import worker_main

worker_main(int(sys.argv[1]), int(sys.argv[2]))
