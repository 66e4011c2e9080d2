"""The shared match buffer (SASE+ §5.1): ``buffer`` holds the selected events and their
predecessor links; ``versions`` the paper's Dewey numbers, kept as its definition of run
descent (no runtime path reads them)."""
