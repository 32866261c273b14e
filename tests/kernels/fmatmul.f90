! Advice in the program's language: a Fortran matrix product. Its parallel advice must be
! written as a Fortran OpenMP directive (`!$omp parallel do`), not a C pragma.
program fmatmul
  implicit none
  integer, parameter :: n = 40
  real(8) :: a(n, n), b(n, n), c(n, n)
  integer :: i, j, k
  do j = 1, n
    do i = 1, n
      a(i, j) = mod(i * 3 + j, 7) * 0.25d0
      b(i, j) = mod(i + j * 5, 11) * 0.5d0
      c(i, j) = 0.0d0
    end do
  end do
  do j = 1, n
    do k = 1, n
      do i = 1, n
        c(i, j) = c(i, j) + a(i, k) * b(k, j) ! FM_BODY
      end do
    end do
  end do
  print '(z16)', sum(c)
end program fmatmul
