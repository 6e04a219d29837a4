"""Files the toolkit writes and reads back: one atomic writer (`atomic`), folder locks
(`locks`), ownership proofs (`ownership`), netCDF files and the HDF5 files refused when
read back (`netcdf`), and output folders that hold the user's files too (`output`).

Knows nothing of sweeps or experiments; the solve's trajectory and the sweep engine build
on it. The names below are re-exported; nothing else lives here.
"""

from .atomic import (
    proven_temporary_target as proven_temporary_target,
)
from .atomic import (
    remove_stale_temporaries as remove_stale_temporaries,
)
from .atomic import (
    temporary_target as temporary_target,
)
from .atomic import (
    write_atomic as write_atomic,
)
from .locks import (
    LOCK_NAME as LOCK_NAME,
)
from .locks import (
    FolderBusy as FolderBusy,
)
from .locks import (
    check_lock_file as check_lock_file,
)
from .locks import (
    check_regular_or_absent as check_regular_or_absent,
)
from .locks import (
    is_flows_lock as is_flows_lock,
)
from .locks import (
    lock_folder as lock_folder,
)
from .netcdf import (
    hdf5_hazard as hdf5_hazard,
)
from .netcdf import (
    machine as machine,
)
from .netcdf import (
    netcdf_arrays_writable as netcdf_arrays_writable,
)
from .netcdf import (
    usable_cores as usable_cores,
)
from .netcdf import (
    versions as versions,
)
from .netcdf import (
    write_netcdf as write_netcdf,
)
from .netcdf import (
    write_netcdf_arrays as write_netcdf_arrays,
)
from .output import (
    INDEX_NAME as INDEX_NAME,
)
from .output import (
    MANIFEST as MANIFEST,
)
from .output import (
    REPORT_NAME as REPORT_NAME,
)
from .output import (
    OutputDir as OutputDir,
)
from .output import (
    add_owned_file as add_owned_file,
)
from .output import (
    check_output_path as check_output_path,
)
from .output import (
    file_digest as file_digest,
)
from .ownership import (
    OWNER_KEY_ENV as OWNER_KEY_ENV,
)
from .ownership import (
    create_owned_temporary as create_owned_temporary,
)
from .ownership import (
    owner_key as owner_key,
)
from .ownership import (
    owner_key_path as owner_key_path,
)
from .ownership import (
    owner_tag as owner_tag,
)
