# SPDX-License-Identifier: Apache-2.0
"""The package version; tests check it equals the loaded library's afmesh_version()."""

__version__ = "0.1.0"
