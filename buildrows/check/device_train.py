"""Which toolkit built a wheel's device code, and the oldest driver it loads on (SPEC §8, issue 27).

Read from the device code itself, never assumed from the row: every PTX entry's header records its
PTX ISA version (the `.version` of its text), and each ISA belongs to one train
(`buildrows/data/cuda_trains.toml`, `[ptx-isa]`). A driver JIT-compiles PTX only up to its own
train's ISA, so PTX newer than the row's train breaks the row's promise on the drivers that train
supports: GPUs without a cubin get CUDA_ERROR_UNSUPPORTED_PTX_VERSION there.

Cubins load on any driver of their CUDA major (minor-version compatibility), from the major's first
driver on. Which toolkit wrote them is read where a cubin says so and is stored uncompressed: its
`.note.nv.tkinfo` note (`Cuda compilation tools, release 12.9`, see `buildrows.binaries.fatbin`),
which ptxas and nvlink write in CUDA 12.8's cubins and later (not in older ones, and not in every
newer one). A compressed cubin is not inflated to look. A cubin newer than the row's train breaks
the row's promise of the train that built it; of another CUDA major, its driver floor too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from buildrows.policy.trains import (
    Train,
    beyond_data,
    driver_floor,
    newest_ptx_isa,
    ptx_isa_train,
    train_driver,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from buildrows.binaries.wheelread import LibraryInfo
    from buildrows.check.judging import Artifact, CheckResult, Expectation

__all__ = ["check_device_train", "cubin_train", "oldest_driver", "train_of_code"]

NAME = "device-code-train"


def _isa(isa: tuple[int, int]) -> str:
    return f"{isa[0]}.{isa[1]}"


def _driver_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def _jit_driver(isa: tuple[int, int]) -> tuple[Train | None, str | None]:
    """The train that wrote `isa` and the oldest driver that JIT-compiles it (None: not in the table)."""
    train = ptx_isa_train(isa)
    if train is None:
        return None, None
    found = train_driver(train)
    return train, (found[1] if found is not None else None)


def _known_isas() -> list[tuple[int, int]]:
    from buildrows.policy.trains import _trains_data

    return [(int(a), int(b)) for a, b in (isa.split(".") for isa in _trains_data()["ptx-isa"])]


def oldest_driver(isas: list[tuple[int, int]], major: int) -> tuple[str | None, str]:
    """The oldest Linux driver every part of the device code loads on, and why.

    None with a reason naming the train when the data has no number for the driver its PTX needs
    (a train released after the data's drivers were read): never an older train's number."""
    floor = driver_floor(major)
    best, why = floor, f"CUDA {major}'s first driver (minor-version compatibility)"
    if isas:
        newest = max(isas)
        train, driver = _jit_driver(newest)
        if train is not None and train.major < major:  # an older major's ISA: every driver of the row's major JITs it
            return best, f"{why}, which JIT-compiles its PTX ISA {_isa(newest)} (CUDA {train}'s)"
        if train is None and newest < min(_known_isas(), default=newest):
            return best, why  # older than every ISA the data lists: any driver of the major JIT-compiles it
        if train is None and newest < max(_known_isas(), default=newest):
            return None, (f"a driver that JIT-compiles its PTX ISA {_isa(newest)}, which buildrows' data does not "
                          "list (no CUDA release NVIDIA's PTX ISA history names writes it)")
        if train is None:
            return None, (f"a driver newer than any buildrows knows, to JIT-compile its PTX ISA {_isa(newest)} "
                          "(newer than every ISA in its data)")
        if driver is None and not (train.minor == 0 and train.major == major and floor is not None):
            return None, (f"CUDA {train}'s driver, to JIT-compile its PTX ISA {_isa(newest)} (buildrows' data has "
                          f"no Linux driver number for CUDA {train}: NVIDIA's CUDA release notes list it)")
        if driver is not None and (best is None or _driver_key(driver) > _driver_key(best)):
            best, why = driver, f"CUDA {train}'s, to JIT-compile its PTX ISA {_isa(newest)}"
    return best, why


def train_of_code(libraries: Iterable[LibraryInfo]) -> tuple[Train, str] | None:
    """The oldest train that can have written the libraries' PTX (the train of the newest ISA), and that ISA."""
    isas = [isa for lib in libraries for isa in lib.ptx_isa]
    if not isas:
        return None
    train = ptx_isa_train(max(isas))
    return (train, _isa(max(isas))) if train is not None else None


def cubin_train(libraries: Iterable[LibraryInfo]) -> Train | None:
    """The newest toolkit the libraries' cubins' toolkit notes name (None: no cubin carries one read)."""
    found = [tk for lib in libraries for tk in lib.cubin_toolkits]
    return Train(*max(found)) if found else None


def _cubin_problem(path: str, wrote: Train, train: Train, label: str) -> str:
    """Why cubins written by `wrote` break a claim of `train`, and what that costs."""
    if wrote.major > train.major:
        floor = driver_floor(wrote.major)
        cost = (f"its cubins need CUDA {wrote.major}'s driver" + (f" (>= {floor} on Linux)" if floor else "")
                + f", not the CUDA {train.major} drivers the row promises")
    else:
        cost = (f"they load on every CUDA {train.major} driver (minor-version compatibility), but the wheel is not "
                f"the CUDA {train} build the row promises")
    return (f"{path}: its cubins were written by CUDA {wrote} (their toolkit note), but {label} claims CUDA {train}: "
            f"it was built by a newer toolkit; {cost}; fix: build it with the CUDA {train} toolkit, or check it against "
            f"a CUDA {wrote} row")


def _count(units: list[bool]) -> str:
    """"2 libraries", "1 library and 1 kernel-file group" (True: a group of kernel files)."""
    libs, groups = units.count(False), units.count(True)
    parts = ([f"{libs} {'library' if libs == 1 else 'libraries'}"] if libs else []) + (
        [f"{groups} kernel-file {'group' if groups == 1 else 'groups'}"] if groups else [])
    return " and ".join(parts)


def check_device_train(exp: Expectation, info: Artifact) -> CheckResult:
    """Every library's PTX was written by the row's train or an older one; says the oldest driver."""
    from buildrows.check.judging import CheckResult, library_rule, train_of_digits
    from buildrows.check.kernels import kernel_units

    assert exp.cuda is not None
    bad: list[str] = []
    seen: list[tuple[int, int]] = []
    cubins_by: list[Train] = []
    late: list[str] = []  # cubins newer than the claim (after the PTX lines)
    own_trains: list[Train] = []  # per-train libraries' cubins: each held to its own train, apart from the row's
    skipped: list[str] = []  # vendored libraries with device code: not the project's toolkit
    beyond: list[tuple[int, int]] = []  # ISAs newer than the data, under a row of a train newer than it
    judged: list[bool] = []  # per library or kernel-file group with PTX: whether it is kernel files
    dated: list[bool] = []  # the same, for cubins with a toolkit note
    # Shared libraries, then kernel files (one unit per rule, as the device-code check groups them).
    units = [(lib, *library_rule(exp, lib.path), False) for lib in info.libraries]
    units += [(u.library, u.rule, u.digits, True) for u in kernel_units(exp, info)]
    for lib, rule, digits, files in units:
        if not lib.ptx_isa and not lib.cubin_toolkits:
            continue
        if rule is not None and rule.vendored:
            skipped.append(lib.path)  # bundled from elsewhere: named, not judged (device-code-covers-row says more)
            continue
        train, label = exp.cuda, "the row"
        if rule is not None and rule.per_train:
            own = train_of_digits(digits)
            if own is None:
                continue  # the device-code check names a per-train library without a train
            train, label = own, "its name"
        if lib.cubin_toolkits:
            newest = Train(*max(lib.cubin_toolkits))
            if label == "the row":
                dated.append(files)
                cubins_by.append(newest)
            else:
                own_trains.append(newest)
            if newest > train:
                late.append(_cubin_problem(lib.path, newest, train, label))
        if not lib.ptx_isa:
            continue
        judged.append(files)
        isa = max(lib.ptx_isa)
        seen.append(isa)
        if isa <= newest_ptx_isa(train):
            continue
        wrote, driver = _jit_driver(isa)
        if wrote is None and beyond_data(train):
            beyond.append(isa)  # both newer than the data: taken to be the row's train's own ISA
            continue
        if wrote is None:
            by = ("newer than any train buildrows knows" if isa > max(_known_isas(), default=isa) else
                  "not in buildrows' data") + " (add it under [ptx-isa] in buildrows/data/cuda_trains.toml)"
            needs = "a newer driver than any buildrows knows"
            other = "the row of the train that built it"
        else:
            by = f"CUDA {wrote}'s"
            needs = f"CUDA {wrote}'s driver" + (f" (>= {driver} on Linux)" if driver else "")
            other = f"a CUDA {wrote} row"
        bad.append(f"{lib.path}: PTX ISA {_isa(isa)} is {by}, but {label} claims CUDA {train} (which writes ISA "
                   f"{_isa(newest_ptx_isa(train))} at most): it was built by a newer toolkit, and its PTX needs "
                   f"{needs}; on the drivers CUDA {train} supports, GPUs without a cubin get "
                   f"CUDA_ERROR_UNSUPPORTED_PTX_VERSION; fix: build it with the CUDA {train} toolkit, or check "
                   f"it against {other}")
    driver, why = oldest_driver(seen, exp.cuda.major)
    if beyond and max(beyond) == max(seen):
        driver, why = None, (f"CUDA {exp.cuda}'s driver or newer, to JIT-compile its PTX ISA {_isa(max(beyond))} "
                             f"(newer than buildrows' CUDA data, as CUDA {exp.cuda} is: taken to be its own)")
    top = max(cubins_by, default=None)
    if top is not None and top.major > exp.cuda.major:  # cubins of a newer major load only on its drivers
        top_floor = driver_floor(top.major)
        if top_floor is not None and (driver is None or _driver_key(top_floor) > _driver_key(driver)):
            driver, why = top_floor, f"CUDA {top.major}'s first driver, for its CUDA {top} cubins"
    where = " (Linux x86_64 numbering; Windows drivers are numbered apart)" if exp.platform.startswith("windows") else ""
    floor = driver_floor(exp.cuda.major)
    cubins = (f"; GPUs its cubins cover load it from {floor}, CUDA {exp.cuda.major}'s first driver"
              if floor is not None and driver != floor and not bad and not late else "")
    summary = (f"oldest driver it loads on: {driver}, {why}{cubins}{where}" if driver is not None
               else f"oldest driver it loads on: {why}{cubins}{where}")
    bad += late
    if bad:
        return CheckResult(NAME, False, [*bad, summary])
    vend = (f"not judged, vendored (not built by the project's toolkit): {', '.join(skipped)}; " if skipped else "")
    apart = vend + (f"the cubins of {len(own_trains)} per-train {'library' if len(own_trains) == 1 else 'libraries'} "
           f"(CUDA {', '.join(str(tr) for tr in sorted(set(own_trains)))}, their toolkit notes) are no newer than "
           "the train each name carries; " if own_trains else "")
    if not seen and not cubins_by:
        if apart:
            return CheckResult(NAME, True, [f"{apart}nothing else carries PTX or a cubin toolkit note; {summary}"])
        return CheckResult(NAME, True, [f"{vend}no PTX, and no cubin with a toolkit note, to date it (ptxas writes that note "
                                        f"in some CUDA 12.8+ cubins; compressed cubins are not inflated to look); {summary}"])
    dating = []
    if seen:
        dating.append(f"PTX ISA {_isa(max(seen))} in {_count(judged)}")
    if cubins_by:
        dating.append(f"cubins of CUDA {max(cubins_by)} (their toolkit notes) in {_count(dated)}")
    return CheckResult(NAME, True, [f"{' and '.join(dating)}: no newer than CUDA {exp.cuda} writes; {apart}{summary}"])
