module batkube.test/timeshim

go 1.19
