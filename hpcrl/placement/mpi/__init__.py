"""What only a job of several MPI ranks needs: spare ranks that take lost collectors'
places, and every rank's watch for lost ranks. A run of one process loads nothing of this
package; the ranks' roles and their data paths, which every run uses, live in
:mod:`hpcrl.placement.ranks` and :mod:`hpcrl.placement.wiring`."""
