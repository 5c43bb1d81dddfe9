"""One root error class. The CLI turns it into `Error: ...` and an exit code at a single boundary."""


class ForensicsError(Exception):
    """An error the user can act on: says which file, which row, what was expected."""

    exit_code = 2


class InputError(ForensicsError):
    """Evidence that cannot be used at all (missing bundle, no readable gateway log, bad config)."""

    exit_code = 2


class CapacityError(ForensicsError):
    """A size limit of the analysis that the user can work around (the message says how)."""

    exit_code = 2
