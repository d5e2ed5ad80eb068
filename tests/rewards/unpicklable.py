"""An object that pickles but cannot be unpickled, for tests of what a worker does with such a task."""


def _refuse():
    raise RuntimeError("this object refuses to be unpickled")


class Unpicklable:
    def __reduce__(self):
        return (_refuse, ())
